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

    /// Derived from the interval, not stored: a change to these rules bumps `data::VERSION`, so a
    /// report is read by the rules that wrote it.
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
