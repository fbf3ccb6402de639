//! `cargo xtask bench-report [--callgrind]`: what the series costs and gains, from `cargo
//! bench`'s medians and from paired rounds of `bench-driver` on the points of
//! `crates/vendor/points`:
//!
//! - the whole series against the published crates at every vocabulary, with floors and the
//!   scaling chart (`target/bench-scaling.svg`);
//! - one table per patch: its branch against the branch it builds on, at the real vocabulary;
//! - the decode loop: the whole series, and each patch that makes a comparison faster per call.
//!
//! Printed and written to `target/bench-report.md`, and as data to `target/bench-report.json`
//! (`data::Report`), from which `cargo xtask pr` writes each pull request's evidence.
//!
//! Why paired rounds: on a shared machine two criterion measurements taken a minute apart
//! drift by 10% and more, so the ratio of their medians, with an interval from the samples of
//! each, claims differences that are not there. `bench-driver pair` times the sides back to
//! back, rotating which goes first; the ratio within a round cancels the drift.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use shared::bench::Settings;
use shared::{PUBLISHED_POINT, SERIES_POINT};

use crate::project::Layout;

pub mod chart;
mod criterion;
pub mod data;
mod measure;
pub mod render;
pub mod stats;

use measure::{
    build_driver, commit, count_instructions, machine, measure_decode, measure_pairs, stdout_of,
};

pub use chart::svg as chart_svg;
pub use criterion::{read_criterion, Measurement};
use data::{Decode, PatchStep, Report, Step};
use stats::{median, parse_rounds, Paired, Verdict};

/// One comparison at one vocabulary size: the published point against the whole series.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub device: String,
    pub comparison: String,
    pub vocab: String,
    /// criterion's medians of one call: the published point, the whole series, and the
    /// comparison's floor (on the CPU).
    pub published_ns: f64,
    pub series_ns: f64,
    pub floor_ns: Option<f64>,
    /// Series over published, from paired rounds, once measured.
    pub paired: Option<Paired>,
    /// Series over published instructions per call, where callgrind counted them.
    pub instructions: Option<f64>,
}

/// Pairs each `published` measurement with the `series` one of the same group and value, and
/// the `floor` one where there is one.
pub fn rows(measurements: &[Measurement]) -> Vec<Row> {
    // The decode loop's groups have their own section.
    let mut rows: Vec<Row> = measurements
        .iter()
        .filter(|m| m.function == PUBLISHED_POINT && !m.group.ends_with("_decode"))
        .filter_map(|published| {
            let beside = |function: &str| {
                measurements.iter().find(|m| {
                    m.function == function
                        && m.group == published.group
                        && m.value == published.value
                })
            };
            let series = beside(SERIES_POINT)?;
            let (device, comparison) = published
                .group
                .split_once('_')
                .unwrap_or(("?", &published.group));
            Some(Row {
                device: device.to_string(),
                comparison: comparison.to_string(),
                vocab: published.value.clone().unwrap_or_default(),
                published_ns: median(&published.per_iteration_ns),
                series_ns: median(&series.per_iteration_ns),
                floor_ns: beside("floor").map(|m| median(&m.per_iteration_ns)),
                paired: None,
                instructions: None,
            })
        })
        .collect();
    rows.sort_by_key(|row| {
        let vocab: u64 = row.vocab.parse().unwrap_or(0);
        (row.device.clone(), row.comparison.clone(), vocab)
    });
    rows
}

/// How many paired rounds `bench-driver pair` times per row.
pub const ROUNDS: usize = 201;
/// About how long each side's calls take in one round, in nanoseconds.
const ROUND_NS: f64 = 2e6;
/// The two call counts that callgrind runs each side with: their difference cancels the setup.
const COUNTED_CALLS: [u64; 2] = [4, 16];
/// How many paired rounds of the decode loop `bench-report` runs per comparison.
pub const DECODE_ROUNDS: usize = 11;

/// A patch: its number (its point), its subject and the point it builds on.
#[derive(Clone, Debug, PartialEq)]
pub struct Patch {
    pub number: String,
    pub subject: String,
    pub before: String,
}

/// The series' patches as the report measures them.
pub fn patches(layout: &Layout) -> Result<Vec<Patch>> {
    let builds_on = crate::branches::builds_on(&layout.patches())?;
    crate::series::load(&layout.patches())?
        .iter()
        .map(|p| {
            Ok(Patch {
                number: p.number().to_string(),
                subject: p.message()?.subject,
                before: builds_on
                    .get(p.number())
                    .cloned()
                    .unwrap_or_else(|| PUBLISHED_POINT.to_string()),
            })
        })
        .collect()
}

/// Each point's time of one call in every round, at the real vocabulary on the CPU, by point.
pub type PointRounds = BTreeMap<String, Vec<f64>>;

/// `bench-driver pair`'s output on `points`, `calls` calls a side and round, as each point's time
/// of one call per round; a point that `bench-driver` left out is not there.
pub fn per_call(points: &[String], output: &str, calls: u64) -> Result<PointRounds> {
    let rounds = parse_rounds(output, points.len())?;
    Ok(points
        .iter()
        .enumerate()
        .filter(|(i, _)| rounds.iter().all(|r| !r[*i].is_nan()))
        .map(|(i, point)| {
            let times = rounds.iter().map(|r| r[i] / calls as f64).collect();
            (point.clone(), times)
        })
        .collect())
}

/// Instructions per call that callgrind counted, by comparison and point.
pub type Counts = BTreeMap<(String, String), f64>;

/// After over before instructions per call in `comparison`, where callgrind counted both.
fn instruction_ratio(counts: &Counts, comparison: &str, before: &str, after: &str) -> Option<f64> {
    let count = |point: &str| counts.get(&(comparison.to_string(), point.to_string()));
    Some(count(after)? / count(before)?)
}

/// Each patch's step from the points' rounds of every comparison, and their instruction counts
/// per call where callgrind ran.
pub fn steps(
    patches: &[Patch],
    rounds: &BTreeMap<String, PointRounds>,
    counts: &Counts,
) -> Result<Vec<PatchStep>> {
    let step = |patch: &Patch| {
        // A comparison that one of the two points cannot run is left out of the step.
        let rows = rounds.iter().filter_map(|(comparison, points)| {
            let (before, after) = (points.get(&patch.before)?, points.get(&patch.number)?);
            let pairs: Vec<(f64, f64)> =
                before.iter().copied().zip(after.iter().copied()).collect();
            let instructions = instruction_ratio(counts, comparison, &patch.before, &patch.number);
            let mut paired = Paired::of(&pairs);
            paired.weigh(instructions);
            Some(Step {
                comparison: comparison.clone(),
                before_ns: median(before),
                after_ns: median(after),
                paired,
                instructions,
            })
        });
        PatchStep {
            patch: patch.number.clone(),
            subject: patch.subject.clone(),
            before: patch.before.clone(),
            rows: rows.collect(),
            decode: Vec::new(),
        }
    };
    Ok(patches.iter().map(step).collect())
}

/// Whether `step` makes `comparison` faster per call: faster in time, and with fewer
/// instructions where callgrind counted them; at the same or more instructions the time moves
/// apart from the work, most likely with where the code lands, and is not claimed as a gain.
pub fn faster(step: &PatchStep, comparison: &str) -> bool {
    step.rows.iter().any(|r| {
        r.comparison == comparison
            && r.paired.verdict() == Verdict::Faster
            && r.paired.work.is_none()
    })
}

/// The points to run the decode loop on for `comparison`: the published point and the whole
/// series, and both sides of every patch whose step makes it faster per call.
pub fn decode_points(comparison: &str, steps: &[PatchStep]) -> Vec<String> {
    let mut points = vec![PUBLISHED_POINT.to_string(), SERIES_POINT.to_string()];
    for step in steps.iter().filter(|step| faster(step, comparison)) {
        for point in [&step.before, &step.patch] {
            if !points.contains(point) {
                points.push(point.clone());
            }
        }
    }
    points
}

/// The decode loop between `before` and `after` from the rounds of `points` (each round: a
/// total and a sampler time, in nanoseconds, per point).
pub fn decode_between(
    comparison: &str,
    points: &[String],
    rounds: &[Vec<f64>],
    tokens: u64,
    before: &str,
    after: &str,
) -> Result<Decode> {
    let index = |name: &str| {
        points
            .iter()
            .position(|p| p == name)
            .with_context(|| format!("the decode loop did not run the point {name}"))
    };
    let (b, a) = (index(before)?, index(after)?);
    let per_token = |side: usize| {
        median(&rounds.iter().map(|r| r[2 * side]).collect::<Vec<_>>()) / tokens as f64 / 1e6
    };
    let share = |side: usize| {
        median(
            &rounds
                .iter()
                .map(|r| r[2 * side + 1] / r[2 * side])
                .collect::<Vec<_>>(),
        )
    };
    let totals: Vec<(f64, f64)> = rounds.iter().map(|r| (r[2 * b], r[2 * a])).collect();
    let saved: Vec<(f64, f64)> = rounds
        .iter()
        .map(|r| (r[2 * b], r[2 * b] - (r[2 * b + 1] - r[2 * a + 1])))
        .collect();
    Ok(Decode {
        comparison: comparison.to_string(),
        before: before.to_string(),
        after: after.to_string(),
        before_ms: per_token(b),
        after_ms: per_token(a),
        before_share: share(b),
        after_share: share(a),
        per_token: Paired::of(&totals),
        sampler_only: Paired::of(&saved),
    })
}

/// The flags of `cargo xtask bench-report`.
#[derive(Debug, Default, clap::Args)]
pub struct Options {
    /// Count instructions per call with valgrind's callgrind too.
    #[arg(long)]
    pub callgrind: bool,
}

pub fn run(layout: &Layout, options: &Options) -> Result<()> {
    let dir = layout.target().join("criterion");
    if !dir.is_dir() {
        bail!(
            "no criterion results in {}: run `cargo bench` first",
            dir.display()
        );
    }
    let measurements = read_criterion(&dir)?;
    let mut rows = rows(&measurements);
    if rows.is_empty() {
        bail!(
            "{} has no published/series pairs: run `cargo bench`",
            dir.display()
        );
    }
    let driver = build_driver(layout)?;
    let settings: Settings = serde_json::from_str(&stdout_of(
        "bench-driver settings",
        std::process::Command::new(&driver).arg("settings"),
    )?)
    .context("bench-driver settings: not the settings' JSON")?;
    let patches = patches(layout)?;
    // Every point at the real vocabulary on the CPU, the published point first; elsewhere the
    // published point and the whole series.
    let mut all = vec![PUBLISHED_POINT.to_string()];
    all.extend(patches.iter().map(|p| p.number.clone()));
    all.push(SERIES_POINT.to_string());
    if let Some(point) = all.iter().find(|point| !settings.points.contains(point)) {
        bail!(
            "bench-driver has no point {point} (it has {}): run `cargo xtask vendor`",
            settings.points.join(", ")
        );
    }
    let real_vocab = settings.vocab.to_string();
    let mut point_rounds: BTreeMap<String, PointRounds> = BTreeMap::new();
    for row in &mut rows {
        let at_real = row.device == "cpu" && row.vocab == real_vocab;
        let points = match at_real {
            true => all.clone(),
            false => vec![PUBLISHED_POINT.to_string(), SERIES_POINT.to_string()],
        };
        let measured = measure_pairs(layout, &driver, row, &points)?;
        if at_real {
            point_rounds.insert(row.comparison.clone(), measured);
        }
    }
    let mut counts = Counts::new();
    if options.callgrind {
        counts = count_instructions(layout, &driver, &point_rounds, &real_vocab)?;
        // The counts are taken at one vocabulary and weigh every vocabulary's verdict.
        for row in rows.iter_mut().filter(|row| row.device == "cpu") {
            let ratio = instruction_ratio(&counts, &row.comparison, PUBLISHED_POINT, SERIES_POINT);
            row.instructions = ratio.filter(|_| row.vocab == real_vocab);
            if let Some(paired) = row.paired.as_mut() {
                paired.weigh(ratio);
            }
        }
    }
    let mut steps = steps(&patches, &point_rounds, &counts)?;
    let decode = match settings.model_on_disk {
        false => None,
        true => {
            let mut whole = Vec::new();
            for comparison in point_rounds.keys() {
                let points = decode_points(comparison, &steps);
                let rounds = measure_decode(layout, &driver, comparison, &points, &settings)?;
                let tokens = settings.decode_tokens;
                let between = |before: &str, after: &str| {
                    decode_between(comparison, &points, &rounds, tokens, before, after)
                };
                whole.push(between(PUBLISHED_POINT, SERIES_POINT)?);
                for step in steps.iter_mut() {
                    if faster(step, comparison) {
                        step.decode.push(between(&step.before, &step.patch)?);
                    }
                }
            }
            Some(whole)
        }
    };
    let report = Report {
        machine: machine(),
        date: crate::date::today(),
        commit: commit(layout)?,
        crate_label: crate::pin::label(&crate::pin::read(&layout.pin())?),
        model: settings.model.clone(),
        vocab: settings.vocab,
        seed: settings.seed,
        temperature: settings.temperature,
        rounds: ROUNDS,
        decode_tokens: settings.decode_tokens,
        decode_rounds: DECODE_ROUNDS,
        patches: steps,
        decode,
    };
    let profile: Vec<(String, f64)> = measurements
        .iter()
        .filter(|m| m.group == "cpu_profile")
        .map(|m| (m.function.clone(), median(&m.per_iteration_ns)))
        .collect();
    let markdown = render::report(&rows, &report, &profile);
    let path = layout.target().join("bench-report.md");
    std::fs::write(&path, &markdown)?;
    std::fs::write(
        data_path(layout),
        serde_json::to_string_pretty(&report)? + "\n",
    )?;
    let chart = layout.target().join("bench-scaling.svg");
    std::fs::write(&chart, chart::svg(&rows)?)?;
    print!("{markdown}");
    eprintln!(
        "wrote {}, {} and {}",
        path.display(),
        data_path(layout).display(),
        chart.display()
    );
    Ok(())
}

/// Where `run` writes what it measured as data, for `cargo xtask pr`.
pub fn data_path(layout: &Layout) -> PathBuf {
    layout.target().join("bench-report.json")
}
