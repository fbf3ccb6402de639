//! Medians, paired ratios with bootstrap intervals, the verdict rule, and what the A/A pair (two
//! builds of identical code) explains.

use std::borrow::Borrow;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub fn median<T: Borrow<f64>>(values: impl IntoIterator<Item = T>) -> f64 {
    let mut sorted: Vec<f64> = values.into_iter().map(|v| *v.borrow()).collect();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    match sorted.len() % 2 {
        0 => (sorted[middle - 1] + sorted[middle]) / 2.0,
        _ => sorted[middle],
    }
}

/// Bootstrap resamples of the rounds, and the confidence of their interval.
const RESAMPLES: usize = 2000;
pub const CONFIDENCE: f64 = 0.95;

/// What a ratio's interval says of the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The interval lies within ±1%, or contains 1.0 and is at most `UNRESOLVED_WIDTH` wide.
    NoMeasurableCost,
    /// The interval contains 1.0 but is wider than `UNRESOLVED_WIDTH`: the rounds cannot tell,
    /// which is not the same as the sides being alike.
    NotResolved,
    Slower,
    Faster,
}

/// Wider than this, an interval that holds 1.0 is `NotResolved`: a whole token's time in the
/// decode loop swings by far more than a sampler's share.
pub const UNRESOLVED_WIDTH: f64 = 0.10;

/// What instruction counts say where the time alone would mislead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Work {
    /// The two sides execute the same instructions, within `SAME_INSTRUCTIONS`, and their time
    /// differs beyond what two builds of identical code differ by (`Placement`), or no A/A pair
    /// was measured to tell.
    SameInstructions,
    /// The same instructions, and a time difference that two builds of identical code can show
    /// (`Placement::explains`): where the code lands, not the change, so it is not counted.
    Placement,
    /// The slower side executes fewer instructions.
    FewerInstructions,
    /// The faster side executes more instructions.
    MoreInstructions,
}

/// Instruction ratios within this of 1.0 count as the same work: callgrind's counts move by a
/// few hundredths of a percent between runs.
pub const SAME_INSTRUCTIONS: f64 = 0.001;

/// After over before: the median of the paired rounds' ratios, with its bootstrap interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    pub rounds: usize,
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    /// Set where callgrind counted the instructions and they tell the time apart from the work.
    pub work: Option<Work>,
}

impl Paired {
    /// From rounds of (before, after) times.
    pub fn of(rounds: &[(f64, f64)]) -> Paired {
        let ratios: Vec<f64> = rounds.iter().map(|(b, a)| a / b).collect();
        // SplitMix64, seeded, so that a report's intervals can be reproduced.
        let mut state = 0x5eed_u64;
        let mut below = |n: usize| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let z = (state ^ (state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) % n as u64) as usize
        };
        let mut medians: Vec<f64> = (0..RESAMPLES)
            .map(|_| median((0..ratios.len()).map(|_| ratios[below(ratios.len())])))
            .collect();
        medians.sort_by(f64::total_cmp);
        let tail = ((1.0 - CONFIDENCE) / 2.0 * RESAMPLES as f64).round() as usize;
        Paired {
            rounds: rounds.len(),
            ratio: median(&ratios),
            low: medians[tail],
            high: medians[RESAMPLES - 1 - tail],
            work: None,
        }
    }

    /// From each side's times, round by round.
    pub fn between(before: &[f64], after: &[f64]) -> Paired {
        let rounds: Vec<_> = before.iter().zip(after).map(|(b, a)| (*b, *a)).collect();
        Paired::of(&rounds)
    }

    /// Sets `work` from the instruction ratio, after over before, and the A/A pair of the same
    /// comparison (the control against the published point), where it was measured.
    pub fn weigh(&mut self, instructions: Option<f64>, control: Option<&Paired>) {
        let same = |r: f64| (r - 1.0).abs() <= SAME_INSTRUCTIONS;
        let placement = control.is_some_and(|control| Placement::of(control).explains(self));
        self.work = match (instructions, self.verdict()) {
            (Some(r), Verdict::Slower | Verdict::Faster) if same(r) && placement => {
                Some(Work::Placement)
            }
            (Some(r), Verdict::Slower | Verdict::Faster) if same(r) => Some(Work::SameInstructions),
            (Some(r), Verdict::Slower) if r < 1.0 => Some(Work::FewerInstructions),
            (Some(r), Verdict::Faster) if r > 1.0 => Some(Work::MoreInstructions),
            _ => None,
        };
    }

    /// "1.010 (0.997 to 1.023)", rounded outwards so that it holds the exact interval.
    pub fn interval(&self) -> String {
        format!("{:.3} ({})", self.ratio, outwards(self.low, self.high))
    }

    /// Derived, so that a report written before a rule changed reads by the rule of today.
    pub fn verdict(&self) -> Verdict {
        let (low, high) = (self.low, self.high);
        let holds_one = low <= 1.0 && 1.0 <= high;
        if (low >= 0.99 && high <= 1.01) || (holds_one && high - low <= UNRESOLVED_WIDTH) {
            Verdict::NoMeasurableCost
        } else if holds_one {
            Verdict::NotResolved
        } else if low > 1.0 {
            Verdict::Slower
        } else {
            Verdict::Faster
        }
    }

    /// In words: "within ±1%: slower by 0.4%", "same instructions; slower by 1.2% in time".
    pub fn verdict_text(&self) -> String {
        // Neither slower nor faster: the difference is not counted, so it is not given as one.
        if self.work == Some(Work::Placement) {
            return format!("same instructions; {PLACEMENT}");
        }
        let change = match self.ratio {
            r if r >= 1.0 => format!("slower by {:.1}%", (r - 1.0) * 100.0),
            r => format!("faster by {:.1}%", (1.0 - r) * 100.0),
        };
        let time = match self.verdict() {
            Verdict::NotResolved => "not resolved by these rounds".to_string(),
            // Within ±1%, an interval that misses 1.0 still shows a difference, too small to
            // count: it is given, so that the label never contradicts the interval.
            Verdict::NoMeasurableCost if self.low > 1.0 || self.high < 1.0 => {
                format!("within ±1%: {change}")
            }
            Verdict::NoMeasurableCost => "no measurable cost".to_string(),
            Verdict::Slower | Verdict::Faster => change,
        };
        let work = match self.work {
            None => return time,
            Some(Work::SameInstructions | Work::Placement) => "same",
            Some(Work::FewerInstructions) => "fewer",
            Some(Work::MoreInstructions) => "more",
        };
        format!("{work} instructions; {time} in time")
    }
}

/// What a verdict says of a difference that `Placement` explains.
pub const PLACEMENT: &str = "within what two builds of the same code differ by";

/// "0.997 to 1.023": `low` and `high` rounded outwards, so that the text holds the exact range.
fn outwards(low: f64, high: f64) -> String {
    // The nudge keeps a bound that is already a multiple of 0.001 where it is.
    let low = (low * 1000.0 + 1e-6).floor() / 1000.0;
    let high = (high * 1000.0 - 1e-6).ceil() / 1000.0;
    format!("{low:.3} to {high:.3}")
}

/// The ratios that two builds of identical code can lie apart by where their code lands alone,
/// as the A/A pair (the control against the published point) shows them. The pair's bound
/// furthest from 1.0, read as a factor `m` above 1, is how far one build lay from another in
/// those rounds; a step's after build can lie as far again from the control, in the same
/// direction (after over before is after over control times control over before), so the range
/// reaches from `1 / m²` to `m²`. A step whose interval reaches into it cannot tell its change
/// from where its code lands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    pub low: f64,
    pub high: f64,
}

impl Placement {
    pub fn of(control: &Paired) -> Placement {
        let m = control.high.max(1.0 / control.low);
        Placement {
            low: 1.0 / (m * m),
            high: m * m,
        }
    }

    /// Whether `paired`'s interval reaches into the range: two builds of identical code can
    /// differ by as much.
    pub fn explains(&self, paired: &Paired) -> bool {
        paired.low <= self.high && paired.high >= self.low
    }

    /// "0.873 to 1.145", rounded outwards.
    pub fn range(&self) -> String {
        outwards(self.low, self.high)
    }
}

/// `bench-driver`'s rounds, `sides` numbers a line; a side left out (`-`) reads NaN.
pub fn parse_rounds(text: &str, sides: usize) -> Result<Vec<Vec<f64>>> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            line.split_whitespace()
                .map(|n| match n {
                    "-" => Some(f64::NAN),
                    n => n.parse().ok().filter(|n: &f64| *n > 0.0),
                })
                .collect::<Option<Vec<f64>>>()
                .filter(|numbers| numbers.len() == sides)
                .with_context(|| format!("`{line}` is not {sides} times in nanoseconds"))
        })
        .collect()
}

/// The instruction total in callgrind's output.
pub fn callgrind_total(text: &str) -> Result<u64> {
    text.lines()
        .find_map(|line| {
            line.strip_prefix("totals:")
                .or_else(|| line.strip_prefix("summary:"))
        })
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .context("no totals in the callgrind output")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paired(ratio: f64, low: f64, high: f64) -> Paired {
        let mut paired = Paired::of(&[(1.0, 1.0)]);
        (paired.ratio, paired.low, paired.high) = (ratio, low, high);
        paired
    }

    fn text(ratio: f64, low: f64, high: f64) -> String {
        paired(ratio, low, high).verdict_text()
    }

    #[test]
    fn verdicts_follow_the_rule() {
        assert_eq!(text(1.004, 0.998, 1.012), "no measurable cost");
        assert_eq!(text(1.004, 1.001, 1.008), "within ±1%: slower by 0.4%");
        assert_eq!(text(0.993, 0.992, 0.995), "within ±1%: faster by 0.7%");
        assert_eq!(text(1.03, 1.02, 1.04), "slower by 3.0%");
        assert_eq!(text(1.012, 1.005, 1.02), "slower by 1.2%");
        assert_eq!(text(0.9, 0.85, 0.95), "faster by 10.0%");
    }

    #[test]
    fn instructions_weigh_the_verdict() {
        let mut slower = Paired::of(&[(100.0, 103.0), (100.0, 103.5), (100.0, 102.5)]);
        assert_eq!(slower.verdict(), Verdict::Slower);
        slower.weigh(Some(1.0004), None);
        assert_eq!(
            slower.verdict_text(),
            "same instructions; slower by 3.0% in time"
        );
        slower.weigh(Some(0.5), None);
        assert_eq!(
            slower.verdict_text(),
            "fewer instructions; slower by 3.0% in time"
        );
        slower.weigh(Some(1.2), None);
        assert_eq!(slower.verdict_text(), "slower by 3.0%");
        let mut same = Paired::of(&[(100.0, 100.0), (100.0, 100.5), (100.0, 99.5)]);
        same.weigh(Some(1.0), None);
        assert_eq!(same.verdict_text(), "no measurable cost");
        let mut faster = Paired::of(&[(100.0, 85.0), (100.0, 85.5), (100.0, 84.5)]);
        faster.weigh(Some(1.0119), None);
        assert_eq!(
            faster.verdict_text(),
            "more instructions; faster by 15.0% in time"
        );
    }

    /// The numbers: `top_p` read 1.08 to 1.09 of the time in steps that leave its
    /// instructions as they were, while the published build itself was the one that landed fast.
    #[test]
    fn a_difference_that_the_a_a_pair_shows_too_is_not_counted() {
        let control = paired(1.06, 1.05, 1.07);
        let placement = Placement::of(&control);
        // 1.07 squared; below 1, its inverse.
        assert_eq!(placement.range(), "0.873 to 1.145");
        let weighed = |step: Paired, instructions: f64, control: Option<&Paired>| {
            let mut step = step;
            step.weigh(Some(instructions), control);
            (step.work, step.verdict_text())
        };
        let explained = (
            Some(Work::Placement),
            "same instructions; within what two builds of the same code differ by".to_string(),
        );
        let step = paired(1.08, 1.07, 1.09);
        assert_eq!(weighed(step.clone(), 1.0000, Some(&control)), explained);
        // Faster by as much is placement too: a build can land better as well as worse.
        assert_eq!(
            weighed(paired(0.9, 0.89, 0.91), 1.0, Some(&control)),
            explained
        );
        // Beyond the range in either direction, the same instructions still cost or gain time.
        assert_eq!(
            weighed(paired(1.2, 1.19, 1.21), 0.9999, Some(&control)),
            (
                Some(Work::SameInstructions),
                "same instructions; slower by 20.0% in time".to_string()
            )
        );
        assert_eq!(
            weighed(paired(0.85, 0.84, 0.86), 1.0, Some(&control)),
            (
                Some(Work::SameInstructions),
                "same instructions; faster by 15.0% in time".to_string()
            )
        );
        // An A/A pair that shows no difference explains none.
        let alike = paired(1.0, 0.998, 1.003);
        assert_eq!(Placement::of(&alike).range(), "0.994 to 1.007");
        assert_eq!(
            weighed(step.clone(), 1.0, Some(&alike)).1,
            "same instructions; slower by 8.0% in time"
        );
        // The pair speaks only where the instructions are the same: more of them are a cost.
        assert_eq!(
            weighed(step.clone(), 1.03, Some(&control)),
            (None, text(1.08, 1.07, 1.09))
        );
        // Without the pair, the difference is given with its instructions, as before.
        assert_eq!(weighed(step, 1.0, None).0, Some(Work::SameInstructions));
    }

    #[test]
    fn intervals_are_printed_rounded_outwards() {
        let mut paired = Paired::of(&[(1.0, 1.0)]);
        (paired.ratio, paired.low, paired.high) = (0.992, 0.98962, 0.99812);
        // Rounded to the nearest, the low bound would read 0.990, inside ±1%, while the verdict
        // says faster.
        assert_eq!(paired.interval(), "0.992 (0.989 to 0.999)");
        assert_eq!(paired.verdict_text(), "faster by 0.8%");
        (paired.low, paired.high) = (0.99, 1.004);
        assert_eq!(paired.interval(), "0.992 (0.990 to 1.004)");
    }

    #[test]
    fn paired_rounds_cancel_drift() {
        // The machine slows down threefold over the run; within each round `after` is 10% slower.
        let rounds: Vec<(f64, f64)> = (0..201)
            .map(|i| {
                let drift = 1.0 + 2.0 * i as f64 / 200.0;
                let jitter = 1.0 + ((i * 37) % 11) as f64 / 1000.0;
                (100.0 * drift, 110.0 * drift * jitter)
            })
            .collect();
        let paired = Paired::of(&rounds);
        assert!((paired.ratio - 1.105).abs() < 0.01, "{}", paired.ratio);
        assert!(paired.low <= paired.ratio && paired.ratio <= paired.high);
        assert!(paired.high - paired.low < 0.02, "{paired:?}");
        assert_eq!(paired.verdict(), Verdict::Slower);
        let same: Vec<(f64, f64)> = rounds.iter().map(|&(u, p)| (u, p / 1.1)).collect();
        assert_eq!(Paired::of(&same).verdict(), Verdict::NoMeasurableCost);
    }

    #[test]
    fn rounds_are_parsed_or_refused() -> Result<()> {
        assert_eq!(
            parse_rounds("10 11 12\n12 13 14\n", 3)?,
            [[10.0, 11.0, 12.0], [12.0, 13.0, 14.0]]
        );
        assert_eq!(parse_rounds("10 11\n", 2)?, [[10.0, 11.0]]);
        assert!(parse_rounds("10 11\n", 3).is_err());
        assert!(parse_rounds("0 5 6\n", 3).is_err());
        assert!(parse_rounds("5 x 6\n", 3).is_err());
        assert!(parse_rounds("5 - 6\n", 3)?[0][1].is_nan());
        Ok(())
    }

    #[test]
    fn callgrind_totals_are_read() -> Result<()> {
        let text = "events: Ir\nfl=x\n1 2\ntotals: 123456\n";
        assert_eq!(callgrind_total(text)?, 123456);
        assert_eq!(callgrind_total("events: Ir\nsummary: 99\n")?, 99);
        Ok(())
    }
}
