//! `cargo xtask bench-report [--callgrind]`: upstream against the series' fixes alone and
//! against the whole series, one row per comparison and vocabulary: criterion's medians
//! (`cargo bench`), the comparison's floor, the ratios and their 95% intervals from paired
//! rounds, verdicts, and with `--callgrind` instructions per call. Printed and written to
//! `target/bench-report.md` (the table alone to `target/bench-table.md`, for the pull
//! requests), with the scaling chart in `target/bench-scaling.svg`.
//!
//! Why paired rounds: on a shared machine two criterion measurements taken a minute apart
//! drift by 10% and more, so the ratio of their medians, with an interval from the samples of
//! each, claims differences that are not there. `bench-driver pair` times the sides back to
//! back, rotating which goes first; the ratio within a round cancels the drift.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::project::{self, Layout};

mod chart;

pub use chart::svg as chart_svg;

/// One benchmark's samples, as criterion saved them.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub group: String,
    pub function: String,
    pub value: Option<String>,
    /// The time of one iteration in each sample, in nanoseconds.
    pub per_iteration_ns: Vec<f64>,
    /// criterion's own median estimate, to check ours against.
    pub criterion_median_ns: f64,
}

/// Every benchmark under criterion's folder (`target/criterion`), from each `new/` run.
pub fn read_criterion(dir: &Path) -> Result<Vec<Measurement>> {
    let mut found = Vec::new();
    collect_runs(dir, &mut found)?;
    found.sort();
    let mut measurements = Vec::new();
    for run in found {
        let read = |name: &str| -> Result<Value> {
            let path = run.join(name);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
        };
        let benchmark = read("benchmark.json")?;
        let sample = read("sample.json")?;
        let estimates = read("estimates.json")?;
        let text = |key: &str| {
            benchmark
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let numbers = |key: &str| -> Result<Vec<f64>> {
            sample
                .get(key)
                .and_then(Value::as_array)
                .with_context(|| format!("{}: sample.json has no `{key}`", run.display()))?
                .iter()
                .map(|v| v.as_f64().context("not a number"))
                .collect()
        };
        let (iters, times) = (numbers("iters")?, numbers("times")?);
        if iters.len() != times.len() || iters.is_empty() {
            bail!(
                "{}: sample.json's iters and times do not pair up",
                run.display()
            );
        }
        measurements.push(Measurement {
            group: text("group_id").context("benchmark.json has no group_id")?,
            function: text("function_id").unwrap_or_default(),
            value: text("value_str"),
            per_iteration_ns: times.iter().zip(&iters).map(|(t, i)| t / i).collect(),
            criterion_median_ns: estimates
                .pointer("/median/point_estimate")
                .and_then(Value::as_f64)
                .context("estimates.json has no median")?,
        });
    }
    Ok(measurements)
}

/// The folders `…/new` that hold a `benchmark.json`.
fn collect_runs(dir: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default();
        if !path.is_dir() || name == "report" || name == "base" {
            continue;
        }
        if name == "new" && path.join("benchmark.json").is_file() {
            found.push(path);
        } else {
            collect_runs(&path, found)?;
        }
    }
    Ok(())
}

pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    } else {
        sorted[middle]
    }
}

/// SplitMix64: a seeded generator, so that a report's intervals can be reproduced.
struct SplitMix(u64);

impl SplitMix {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// `bench-driver pair`'s output: one line per round, a time in nanoseconds per side, upstream
/// first and patched last (`<upstream ns> <fixes ns> <patched ns>`).
pub fn parse_rounds(text: &str, sides: usize) -> Result<Vec<Vec<f64>>> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let numbers: Option<Vec<f64>> = line
                .split_whitespace()
                .map(|n| n.parse().ok().filter(|n: &f64| *n > 0.0))
                .collect();
            match numbers {
                Some(numbers) if numbers.len() == sides => Ok(numbers),
                _ => bail!("`{line}` is not {sides} times in nanoseconds"),
            }
        })
        .collect()
}

/// "no measurable cost" only when the interval contains 1.0 or lies within ±1%.
pub fn verdict(ratio: f64, (low, high): (f64, f64)) -> String {
    if (low <= 1.0 && 1.0 <= high) || (low >= 0.99 && high <= 1.01) {
        "no measurable cost".to_string()
    } else if low > 1.0 {
        format!("slower by {:.1}%", (ratio - 1.0) * 100.0)
    } else {
        format!("faster by {:.1}%", (1.0 - ratio) * 100.0)
    }
}

/// How many paired rounds `bench-driver pair` times per row.
pub const ROUNDS: usize = 201;
/// About how long each side's calls take in one round, in nanoseconds.
const ROUND_NS: f64 = 2e6;
/// Bootstrap resamples of the rounds, and the interval they give.
const RESAMPLES: usize = 2000;
const CONFIDENCE: f64 = 0.95;
/// The two call counts that callgrind runs each side with: their difference cancels the setup.
const COUNTED_CALLS: [u64; 2] = [4, 16];

/// The ratio of one comparison from paired rounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Paired {
    pub rounds: usize,
    /// The median of the rounds' patched / upstream ratios.
    pub ratio: f64,
    /// Its 95% percentile-bootstrap interval over rounds.
    pub interval: (f64, f64),
    pub verdict: String,
}

impl Paired {
    pub fn of(rounds: &[(f64, f64)]) -> Paired {
        let ratios: Vec<f64> = rounds
            .iter()
            .map(|(upstream, patched)| patched / upstream)
            .collect();
        let mut rng = SplitMix(0x5eed);
        let mut medians: Vec<f64> = (0..RESAMPLES)
            .map(|_| {
                let drawn: Vec<f64> = (0..ratios.len())
                    .map(|_| ratios[rng.below(ratios.len())])
                    .collect();
                median(&drawn)
            })
            .collect();
        medians.sort_by(f64::total_cmp);
        let ratio = median(&ratios);
        // The percentile interval: the resamples cut off on each side.
        let tail = ((1.0 - CONFIDENCE) / 2.0 * RESAMPLES as f64).round() as usize;
        let interval = (medians[tail], medians[RESAMPLES - 1 - tail]);
        Paired {
            rounds: rounds.len(),
            ratio,
            interval,
            verdict: verdict(ratio, interval),
        }
    }
}

/// One comparison at one vocabulary size.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub device: String,
    pub comparison: String,
    pub vocab: String,
    /// criterion's medians of one call: the published module, the series' fixes alone (where
    /// measured), the whole series, and the comparison's floor (on the CPU).
    pub upstream_ns: f64,
    pub fixes_ns: Option<f64>,
    pub patched_ns: f64,
    pub floor_ns: Option<f64>,
    /// Patched over upstream, from paired rounds, once measured.
    pub paired: Option<Paired>,
    /// Fixes over upstream, likewise: what the fixes cost without the speed patches.
    pub fixes: Option<Paired>,
    /// Patched over fixes, likewise: what the speed patches gain on top of the fixes.
    pub speed: Option<Paired>,
    /// Each side's median time of one call over the paired rounds, once measured.
    pub round_ns: Vec<f64>,
    /// Patched over upstream instructions per call, where callgrind counted them.
    pub instructions: Option<f64>,
    /// Fixes over upstream instructions per call, likewise.
    pub fixes_instructions: Option<f64>,
}

/// Pairs each `upstream` measurement with the `patched` one of the same group and value, and
/// the `fixes` and `floor` ones where there are.
pub fn rows(measurements: &[Measurement]) -> Vec<Row> {
    let mut rows = Vec::new();
    // The decode loop's groups have their own section.
    let sampling = measurements
        .iter()
        .filter(|m| !m.group.ends_with("_decode"));
    for upstream in sampling.filter(|m| m.function == "upstream") {
        let beside = |function: &str| {
            measurements.iter().find(|m| {
                m.function == function && m.group == upstream.group && m.value == upstream.value
            })
        };
        let Some(patched) = beside("patched") else {
            continue;
        };
        let (device, comparison) = upstream
            .group
            .split_once('_')
            .unwrap_or(("?", &upstream.group));
        rows.push(Row {
            device: device.to_string(),
            comparison: comparison.to_string(),
            vocab: upstream.value.clone().unwrap_or_default(),
            upstream_ns: median(&upstream.per_iteration_ns),
            fixes_ns: beside("fixes").map(|m| median(&m.per_iteration_ns)),
            patched_ns: median(&patched.per_iteration_ns),
            floor_ns: beside("floor").map(|m| median(&m.per_iteration_ns)),
            paired: None,
            fixes: None,
            instructions: None,
            fixes_instructions: None,
            speed: None,
            round_ns: Vec::new(),
        });
    }
    rows.sort_by_key(|row| {
        let vocab: u64 = row.vocab.parse().unwrap_or(0);
        (row.device.clone(), row.comparison.clone(), vocab)
    });
    rows
}

pub fn show_time(ns: f64) -> String {
    match ns {
        ns if ns >= 1e6 => format!("{:.2} ms", ns / 1e6),
        ns if ns >= 1e3 => format!("{:.1} µs", ns / 1e3),
        ns => format!("{ns:.0} ns"),
    }
}

/// Where and on what the numbers were taken.
pub struct Provenance {
    pub machine: String,
    pub crate_label: String,
    pub patches: Vec<String>,
    pub commit: String,
    pub date: String,
    pub settings: Settings,
}

/// What the benches run with, as `bench-driver settings` reports it: the benches decide it.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub model: String,
    /// The real logits' vocabulary; the other sizes are drawn from them.
    pub vocab: u64,
    pub seed: u64,
    pub temperature: f64,
    /// The sides each comparison times, upstream first and patched last.
    pub sides: Vec<String>,
    /// How many tokens one generation of the decode loop decodes.
    pub decode_tokens: u64,
    /// Whether the model is on disk, so that the decode loop can run.
    pub model_on_disk: bool,
}

impl Settings {
    pub fn parse(json: &str) -> Result<Settings> {
        let value: Value = serde_json::from_str(json).context("bench-driver settings: not JSON")?;
        let number = |key: &str| {
            value[key]
                .as_u64()
                .with_context(|| format!("bench-driver settings: no whole number `{key}`"))
        };
        Ok(Settings {
            model: value["model"]
                .as_str()
                .context("bench-driver settings: no `model`")?
                .to_string(),
            vocab: number("vocab")?,
            seed: number("seed")?,
            temperature: value["temperature"]
                .as_f64()
                .context("bench-driver settings: no `temperature`")?,
            sides: value["sides"]
                .as_array()
                .context("bench-driver settings: no `sides`")?
                .iter()
                .map(|side| side.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .filter(|sides| {
                    sides.first().is_some_and(|s| s == "upstream")
                        && sides.last().is_some_and(|s| s == "patched")
                        && (sides.len() == 2 || sides.len() == 3)
                })
                .context("bench-driver settings: `sides` must be upstream, [fixes,] patched")?,
            decode_tokens: number("decode_tokens")?,
            model_on_disk: value["model_on_disk"]
                .as_bool()
                .context("bench-driver settings: no `model_on_disk`")?,
        })
    }
}

/// The whole report: the table with its heading, then upstream's cost profile.
pub fn render(
    rows: &[Row],
    profile: &[(String, f64)],
    decode: &Decoding,
    provenance: &Provenance,
) -> String {
    let mut out =
        "## Sampling cost: upstream against the fixes and the whole series\n\n".to_string();
    out += &format!(
        "Workspace commit {}; patches {}.\n\n",
        provenance.commit,
        provenance.patches.join(", ")
    );
    out += &render_table(rows, provenance);
    out += &render_decode(decode, provenance);
    if !profile.is_empty() {
        out += "\n### Upstream's cost profile (CPU, 49152 tokens)\n\n";
        out += "What each step of a `sample` call costs alone: the floor for the next \
                performance work.\n\n| step | median |\n|---|---:|\n";
        for (step, ns) in profile {
            out += &format!("| {step} | {} |\n", show_time(*ns));
        }
    }
    out
}

/// The table with what it measured and how to read it: what a pull request's test plan shows
/// (`target/bench-table.md`).
pub fn render_table(rows: &[Row], provenance: &Provenance) -> String {
    let mut out = String::new();
    out += &devices_line(rows);
    let settings = &provenance.settings;
    out += &format!(
        "{} as published against the same crate with the fixes of this stack (the patches before \
         {}) and with all {} of its patches applied. One `sample` call on {}'s real logits ({}) and on vocabularies drawn from them; seed {}, \
         temperature {} (`temperature_0`: upstream `ArgMax` against patched \
         `TopK {{ k: 40, temperature: 0.0 }}`).\n\n",
        provenance.crate_label,
        project::FIRST_SPEED_PATCH,
        provenance.patches.len(),
        settings.model,
        settings.vocab,
        settings.seed,
        settings.temperature
    );
    out += &format!(
        "Machine: {}. Date {}.\n\n",
        provenance.machine, provenance.date
    );
    out +=
        "| comparison | vocab | device | upstream | fixes | patched | floor | fixes / upstream | \
            fixes' verdict | patched / upstream | patched's verdict | instructions: fixes, \
            patched | patched / floor |\n";
    out += "|---|---:|---|---:|---:|---:|---:|---|---|---|---|---|---:|\n";
    let time = |ns: Option<f64>| ns.map_or(String::new(), show_time);
    let ratio = |paired: &Option<Paired>| match paired {
        Some(p) => (
            format!(
                "{:.3} ({:.3} to {:.3})",
                p.ratio, p.interval.0, p.interval.1
            ),
            p.verdict.clone(),
        ),
        None => Default::default(),
    };
    let count = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.4}"));
    for row in rows {
        let (fixes, fixes_verdict) = ratio(&row.fixes);
        let (patched, patched_verdict) = ratio(&row.paired);
        let instructions = match (row.fixes_instructions, row.instructions) {
            (None, None) => String::new(),
            (fixes, patched) => format!("{}, {}", count(fixes), count(patched)),
        };
        let to_floor = row.floor_ns.map_or(String::new(), |floor| {
            format!("{:.1}", row.patched_ns / floor)
        });
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {fixes} | {fixes_verdict} | {patched} | \
             {patched_verdict} | {instructions} | {to_floor} |\n",
            row.comparison,
            row.vocab,
            row.device,
            show_time(row.upstream_ns),
            time(row.fixes_ns),
            show_time(row.patched_ns),
            time(row.floor_ns),
        );
    }
    let rounds = rows
        .iter()
        .find_map(|r| r.paired.as_ref())
        .map_or(0, |p| p.rounds);
    out += &format!(
        "\nupstream: the published module; fixes: the series without its speed patches (those \
         from {first}); patched: the whole series; floor: what any implementation that returns \
         the same tokens must compute, written plainly on logits already on the host (for \
         `gumbel_softmax`, whose stream is new, one generator draw per logit and one pass): \
         criterion's medians of one call. Ratios: the median over {rounds} paired rounds, each \
         timing the sides back to back, rotating which goes first; in brackets its \
         {confidence}% bootstrap interval over rounds. Verdict: \"no measurable cost\" when that \
         interval contains 1.0 or lies within ±1%. Instructions: over upstream's instructions \
         per call under callgrind, which machine noise does not move (one thread). \"Same \
         instructions\": the two sides execute the same work (within 0.1%); \"fewer \
         instructions\": less work. A slower time there comes from where the code lands in \
         memory: the published module built twice, as two crates, differs from itself by as \
         much.\n",
        first = project::FIRST_SPEED_PATCH,
        confidence = CONFIDENCE * 100.0
    );
    out
}

pub fn run(layout: &Layout, callgrind: bool) -> Result<()> {
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
            "{} has no upstream/patched pairs: run `cargo bench`",
            dir.display()
        );
    }
    let driver = build_driver(layout)?;
    let provenance = provenance(layout, &driver)?;
    for row in &mut rows {
        measure_pairs(&driver, row, provenance.settings.sides.len())?;
    }
    if callgrind {
        count_instructions(layout, &driver, &provenance.settings.sides, &mut rows)?;
        same_work(&mut rows);
    }
    let profile: Vec<(String, f64)> = measurements
        .iter()
        .filter(|m| m.group == "cpu_profile")
        .map(|m| (m.function.clone(), median(&m.per_iteration_ns)))
        .collect();
    let decode = match provenance.settings.model_on_disk {
        false => Decoding::NeedsTheModel,
        true => {
            // The comparisons that `cargo bench` ran the decode loop for.
            let mut measured = Vec::new();
            let mut comparisons: Vec<&str> = measurements
                .iter()
                .filter(|m| m.group == "cpu_decode")
                .filter_map(|m| m.value.as_deref())
                .collect();
            comparisons.sort();
            comparisons.dedup();
            for comparison in comparisons {
                measured.push(measure_decode(&driver, comparison, &provenance.settings)?);
            }
            Decoding::Measured(measured)
        }
    };
    let report = render(&rows, &profile, &decode, &provenance);
    let path = layout.target().join("bench-report.md");
    std::fs::write(&path, &report)?;
    std::fs::write(table_path(layout), render_table(&rows, &provenance))?;
    std::fs::write(
        data_path(layout),
        serde_json::to_string_pretty(&data(&rows, &decode, &provenance))?,
    )?;
    let chart = layout.target().join("bench-scaling.svg");
    std::fs::write(&chart, chart::svg(&rows)?)?;
    eprintln!("wrote {}", chart.display());
    print!("{report}");
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// How many paired rounds of the decode loop `bench-report` runs per comparison.
pub const DECODE_ROUNDS: usize = 11;

/// The decode loop's results, or why it did not run.
#[derive(Clone, Debug, PartialEq)]
pub enum Decoding {
    NeedsTheModel,
    Measured(Vec<Decode>),
}

/// One comparison in the decode loop: each side's time per token and the sampler's share of it,
/// and the paired ratios between the sides.
#[derive(Clone, Debug, PartialEq)]
pub struct Decode {
    pub comparison: String,
    /// Per side, in `Settings::sides` order: the median milliseconds per token and the median
    /// share of a token's time spent in `sample`.
    pub sides: Vec<(f64, f64)>,
    /// Patched over upstream per token.
    pub patched: Paired,
    /// The speed patches alone, patched over fixes; `None` with two sides.
    pub speed: Option<Paired>,
    /// The same, counting only the sampler's time: a token's time before, less what the
    /// sampler saves, over the time before. The forward pass is the same on both sides (the
    /// same tokens), so this leaves its noise out.
    pub speed_sampler: Option<Paired>,
}

/// `bench-driver decode`'s rounds for `comparison`, as medians and paired ratios.
fn measure_decode(driver: &Path, comparison: &str, settings: &Settings) -> Result<Decode> {
    let tokens = settings.decode_tokens;
    let output = stdout_of(
        "bench-driver decode",
        std::process::Command::new(driver).args([
            "decode",
            comparison,
            &DECODE_ROUNDS.to_string(),
            &tokens.to_string(),
        ]),
    )?;
    let sides = settings.sides.len();
    let rounds = parse_rounds(&output, 2 * sides)?;
    let total = |side: usize| -> Vec<f64> { rounds.iter().map(|r| r[2 * side]).collect() };
    let per_side = (0..sides)
        .map(|side| {
            let per_token = median(&total(side)) / tokens as f64 / 1e6;
            let shares: Vec<f64> = rounds
                .iter()
                .map(|r| r[2 * side + 1] / r[2 * side])
                .collect();
            (per_token, median(&shares))
        })
        .collect();
    let pairs = |a: usize, b: usize| -> Vec<(f64, f64)> {
        rounds.iter().map(|r| (r[2 * a], r[2 * b])).collect()
    };
    let decode = Decode {
        comparison: comparison.to_string(),
        sides: per_side,
        patched: Paired::of(&pairs(0, sides - 1)),
        speed: (sides == 3).then(|| Paired::of(&pairs(1, 2))),
        speed_sampler: (sides == 3).then(|| {
            let saved: Vec<(f64, f64)> = rounds
                .iter()
                .map(|r| (r[2], r[2] - (r[3] - r[5])))
                .collect();
            Paired::of(&saved)
        }),
    };
    eprintln!(
        "decode {comparison}: patched {:.3} ({:.3} to {:.3}) of upstream per token",
        decode.patched.ratio, decode.patched.interval.0, decode.patched.interval.1
    );
    Ok(decode)
}

/// "In a generation loop": the decode loop's table, or why it is missing.
pub fn render_decode(decode: &Decoding, provenance: &Provenance) -> String {
    let settings = &provenance.settings;
    let mut out = "\n### In a generation loop\n\n".to_string();
    let rows = match decode {
        Decoding::NeedsTheModel => {
            return out + "Not run: the decode loop needs the model: bash ci/fetch-model.sh\n";
        }
        Decoding::Measured(rows) => rows,
    };
    out += &format!(
        "{} decoding {} tokens after the report's prompt on the CPU, each picked by one side's \
         `sample` from the model's logits; the prefill is not timed. Medians over {DECODE_ROUNDS} \
         paired rounds, each generating once per side, rotating which goes first; ratios per \
         token with their 95% bootstrap interval, and the verdict by the same rule as above. The \
         sides generate the same tokens, so their forward passes do the same work: \"sampler's \
         time only\" compares a token's time with that time less what the sampler saves, which \
         leaves the forward pass's noise out.\n\n",
        settings.model, settings.decode_tokens
    );
    let sides = &settings.sides;
    let mut header = "| comparison |".to_string();
    let mut rule = "|---|".to_string();
    for side in sides {
        header += &format!(" {side}: ms per token (tokens/s), sampler's share |");
        rule += "---|";
    }
    header += " patched / upstream | verdict |";
    rule += "---|---|";
    if sides.len() == 3 {
        header += " patched / fixes (the speed patches) | verdict | the same, sampler's time only | verdict |";
        rule += "---|---|---|---|";
    }
    out += &format!("{header}\n{rule}\n");
    let ratio = |p: &Paired| {
        format!(
            "{:.3} ({:.3} to {:.3}) | {}",
            p.ratio, p.interval.0, p.interval.1, p.verdict
        )
    };
    for row in rows {
        out += &format!("| {} |", row.comparison);
        for (ms, share) in &row.sides {
            out += &format!(" {ms:.2} ({:.1}), {:.1}% |", 1e3 / ms, share * 100.0);
        }
        out += &format!(" {} |", ratio(&row.patched));
        if let (Some(speed), Some(sampler)) = (&row.speed, &row.speed_sampler) {
            out += &format!(" {} | {} |", ratio(speed), ratio(sampler));
        }
        out += "\n";
    }
    out
}

/// candle's devices, as the benches prefix their groups, and what measures one.
const DEVICES: [(&str, &str); 3] = [
    ("cpu", "`cargo bench`"),
    (
        "cuda",
        "`cargo bench --features cuda` on a machine with an NVIDIA GPU",
    ),
    ("metal", "`cargo bench --features metal` on a Mac"),
];

/// Which devices the rows measured and which were not run, so that a table without a device's
/// rows never reads as complete.
pub fn devices_line(rows: &[Row]) -> String {
    let parts: Vec<String> = DEVICES
        .iter()
        .map(|(device, how)| {
            if rows.iter().any(|row| row.device == *device) {
                format!("{device} measured")
            } else {
                format!("**{device} not run** ({how})")
            }
        })
        .collect();
    format!("Devices: {}.\n\n", parts.join("; "))
}

/// Where `run` writes what it measured as data, for `cargo xtask pr`.
pub fn data_path(layout: &Layout) -> PathBuf {
    layout.target().join("bench-report.json")
}

/// The CPU rows at the real vocabulary and the decode loop, as `cargo xtask pr` reads them.
pub fn data(rows: &[Row], decode: &Decoding, provenance: &Provenance) -> Value {
    let paired = |p: &Option<Paired>| {
        p.as_ref().map(|p| {
            serde_json::json!({
                "ratio": p.ratio, "low": p.interval.0, "high": p.interval.1, "verdict": p.verdict,
            })
        })
    };
    let rows: Vec<Value> = rows
        .iter()
        .filter(|r| r.device == "cpu" && r.vocab == provenance.settings.vocab.to_string())
        .map(|r| {
            serde_json::json!({
                "comparison": r.comparison,
                // The paired rounds' medians, which the ratios come from.
                "upstream_ns": r.round_ns.first(),
                "fixes_ns": (r.round_ns.len() == 3).then(|| r.round_ns[1]),
                "patched_ns": r.round_ns.last(),
                "fixes": paired(&r.fixes),
                "speed": paired(&r.speed),
            })
        })
        .collect();
    let decode: Vec<Value> = match decode {
        Decoding::NeedsTheModel => Vec::new(),
        Decoding::Measured(rows) => rows
            .iter()
            .map(|d| {
                serde_json::json!({
                    "comparison": d.comparison,
                    "ms_per_token": d.sides.iter().map(|s| s.0).collect::<Vec<_>>(),
                    "sampler_share": d.sides.iter().map(|s| s.1).collect::<Vec<_>>(),
                    "speed": paired(&d.speed),
                    "speed_sampler": paired(&d.speed_sampler),
                })
            })
            .collect(),
    };
    serde_json::json!({
        "first_speed_patch": project::FIRST_SPEED_PATCH,
        "patches": provenance.patches,
        "machine": provenance.machine,
        "date": provenance.date,
        "commit": provenance.commit,
        "model": provenance.settings.model,
        "vocab": provenance.settings.vocab,
        "seed": provenance.settings.seed,
        "temperature": provenance.settings.temperature,
        "decode_tokens": provenance.settings.decode_tokens,
        "rows": rows,
        "decode": decode,
    })
}

/// Where `run` writes the table alone, for the pull request texts.
pub fn table_path(layout: &Layout) -> std::path::PathBuf {
    layout.target().join("bench-table.md")
}

/// `bench-driver`, built as `cargo bench` builds the benches.
fn build_driver(layout: &Layout) -> Result<PathBuf> {
    let status = project::cargo()
        .current_dir(&layout.root)
        .args([
            "build",
            "--release",
            "-q",
            "-p",
            "benches",
            "--bin",
            "bench-driver",
        ])
        .status()?;
    if !status.success() {
        bail!("cannot build bench-driver");
    }
    Ok(layout.target().join("release").join("bench-driver"))
}

/// The paired ratios of `row`: `ROUNDS` rounds of about `ROUND_NS` of calls on each of its
/// `sides` sides.
fn measure_pairs(driver: &Path, row: &mut Row, sides: usize) -> Result<()> {
    let calls = (ROUND_NS / row.upstream_ns).round().clamp(1.0, 2000.0) as u64;
    let rounds = stdout_of(
        "bench-driver pair",
        std::process::Command::new(driver).args([
            "pair",
            &row.comparison,
            &row.vocab,
            &ROUNDS.to_string(),
            &calls.to_string(),
            &row.device,
        ]),
    )?;
    let rounds = parse_rounds(&rounds, sides)?;
    let pairs =
        |side: usize| -> Vec<(f64, f64)> { rounds.iter().map(|r| (r[0], r[side])).collect() };
    let paired = Paired::of(&pairs(sides - 1));
    let fixes = (sides == 3).then(|| Paired::of(&pairs(1)));
    eprintln!(
        "{} {} {}: patched {:.3} ({:.3} to {:.3}), {}; fixes {}",
        row.device,
        row.comparison,
        row.vocab,
        paired.ratio,
        paired.interval.0,
        paired.interval.1,
        paired.verdict,
        fixes
            .as_ref()
            .map_or("not measured".to_string(), |f| format!(
                "{:.3}, {}",
                f.ratio, f.verdict
            )),
    );
    row.paired = Some(paired);
    row.fixes = fixes;
    row.round_ns = (0..sides)
        .map(|side| median(&rounds.iter().map(|r| r[side]).collect::<Vec<_>>()) / calls as f64)
        .collect();
    row.speed =
        (sides == 3).then(|| Paired::of(&rounds.iter().map(|r| (r[1], r[2])).collect::<Vec<_>>()));
    Ok(())
}

/// Instruction ratios within this of 1.0 count as the same work: callgrind's counts move by a
/// few hundredths of a percent between runs.
const SAME_INSTRUCTIONS: f64 = 0.001;

/// Where a side executes the same instructions as upstream (counted at one vocabulary), a time
/// difference is not work the patches add, and where it executes fewer, a slower time is not
/// either: the verdicts of its comparison's rows say so.
pub fn same_work(rows: &mut [Row]) {
    // Each comparison's counts, from the row that has them.
    let counted: Vec<Row> = rows
        .iter()
        .filter(|r| r.instructions.is_some() || r.fixes_instructions.is_some())
        .cloned()
        .collect();
    // What the instruction counts say of the work, where they say the time is not work.
    let work = |ratio: Option<f64>, verdict: &str| match ratio? {
        r if (r - 1.0).abs() <= SAME_INSTRUCTIONS && verdict != "no measurable cost" => {
            Some("same instructions")
        }
        r if r < 1.0 && verdict.starts_with("slower") => Some("fewer instructions"),
        _ => None,
    };
    for row in rows.iter_mut() {
        let Some(counts) = counted
            .iter()
            .find(|c| c.device == row.device && c.comparison == row.comparison)
        else {
            continue;
        };
        for (ratio, paired) in [
            (counts.fixes_instructions, &mut row.fixes),
            (counts.instructions, &mut row.paired),
        ] {
            let Some(paired) = paired.as_mut() else {
                continue;
            };
            if let Some(work) = work(ratio, &paired.verdict) {
                paired.verdict = format!("{work}; {} in time", paired.verdict);
            }
        }
    }
}

/// Fills `instructions` for the CPU rows at 49152 tokens: each side's loop runs under callgrind
/// once per count of `COUNTED_CALLS`, so that the setup cancels out.
fn count_instructions(
    layout: &Layout,
    driver: &Path,
    sides: &[String],
    rows: &mut [Row],
) -> Result<()> {
    let out = layout.target().join("callgrind");
    std::fs::create_dir_all(&out)?;
    for row in rows
        .iter_mut()
        .filter(|r| r.device == "cpu" && r.vocab == "49152")
    {
        let mut per_call = BTreeMap::new();
        for side in sides.iter().map(String::as_str) {
            let mut totals = Vec::new();
            for calls in COUNTED_CALLS {
                let file = out.join(format!("{}-{side}-{calls}.out", row.comparison));
                stdout_of(
                    "valgrind --tool=callgrind",
                    std::process::Command::new("valgrind")
                        .arg("--tool=callgrind")
                        .arg(format!("--callgrind-out-file={}", file.display()))
                        .arg(driver)
                        .args([
                            "count",
                            side,
                            &row.comparison,
                            &row.vocab,
                            &calls.to_string(),
                        ])
                        .env("RAYON_NUM_THREADS", "1"),
                )?;
                totals.push(callgrind_total(&std::fs::read_to_string(&file)?)?);
            }
            let extra_calls = COUNTED_CALLS[1] - COUNTED_CALLS[0];
            per_call.insert(side, (totals[1] - totals[0]) as f64 / extra_calls as f64);
        }
        row.instructions = Some(per_call["patched"] / per_call["upstream"]);
        row.fixes_instructions = per_call.get("fixes").map(|f| f / per_call["upstream"]);
        eprintln!(
            "callgrind {}: {per_call:?} instructions per call",
            row.comparison
        );
    }
    Ok(())
}

/// What `command` prints, or an error with what it said on stderr; `name` says what ran.
fn stdout_of(name: &str, command: &mut std::process::Command) -> Result<String> {
    let output = command
        .output()
        .with_context(|| format!("cannot run {name}"))?;
    if !output.status.success() {
        bail!("{name} failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The instruction total in a callgrind output file.
pub fn callgrind_total(text: &str) -> Result<u64> {
    text.lines()
        .find_map(|line| {
            line.strip_prefix("totals:")
                .or_else(|| line.strip_prefix("summary:"))
        })
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .context("no totals in the callgrind output")
}

fn provenance(layout: &Layout, driver: &Path) -> Result<Provenance> {
    let settings = Settings::parse(&stdout_of(
        "bench-driver settings",
        std::process::Command::new(driver).arg("settings"),
    )?)?;
    let pins = crate::pin::read(&layout.pin())?;
    let patches = crate::series::load(&layout.patches())?
        .into_iter()
        .map(|p| p.file_name.get(..4).unwrap_or_default().to_string())
        .collect();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| "unknown processor".to_string());
    let threads = std::thread::available_parallelism().map_or(0, |n| n.get());
    let commit = match git2::Repository::discover(&layout.root) {
        Ok(repo) => {
            let head = repo.head()?.peel_to_commit()?.id().to_string();
            let dirty = !crate::git::uncommitted(&repo, None)?.is_empty();
            let note = if dirty {
                " with uncommitted changes"
            } else {
                ""
            };
            format!("{}{note}", crate::git::short(&head))
        }
        Err(_) => "unknown".to_string(),
    };
    Ok(Provenance {
        machine: format!(
            "{cpu}, {threads} threads, {} {}",
            std::env::consts::OS,
            std::env::consts::ARCH
        ),
        crate_label: crate::pin::label(&pins),
        patches,
        commit,
        date: crate::date::today(),
        settings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_rule() {
        assert_eq!(verdict(1.004, (0.998, 1.012)), "no measurable cost");
        assert_eq!(verdict(1.004, (1.001, 1.008)), "no measurable cost");
        assert_eq!(verdict(1.03, (1.02, 1.04)), "slower by 3.0%");
        assert_eq!(verdict(1.012, (1.005, 1.02)), "slower by 1.2%");
        assert_eq!(verdict(0.9, (0.85, 0.95)), "faster by 10.0%");
    }

    #[test]
    fn paired_rounds_cancel_drift() {
        // The machine slows down threefold over the run; within each round patched is 10% slower.
        let rounds: Vec<(f64, f64)> = (0..ROUNDS)
            .map(|i| {
                let drift = 1.0 + 2.0 * i as f64 / 200.0;
                let jitter = 1.0 + ((i * 37) % 11) as f64 / 1000.0;
                (100.0 * drift, 110.0 * drift * jitter)
            })
            .collect();
        let paired = Paired::of(&rounds);
        assert!((paired.ratio - 1.105).abs() < 0.01, "{}", paired.ratio);
        assert!(paired.interval.0 <= paired.ratio && paired.ratio <= paired.interval.1);
        assert!(
            paired.interval.1 - paired.interval.0 < 0.02,
            "{:?}",
            paired.interval
        );
        assert!(
            paired.verdict.starts_with("slower by 10."),
            "{}",
            paired.verdict
        );
        let same: Vec<(f64, f64)> = rounds.iter().map(|&(u, p)| (u, p / 1.1)).collect();
        assert_eq!(Paired::of(&same).verdict, "no measurable cost");
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
