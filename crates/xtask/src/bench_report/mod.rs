//! `cargo xtask bench-report`, from `cargo bench`'s medians and `bench-driver`'s paired rounds
//! (two criterion runs a minute apart drift by 10% and more; a round's ratio does not).

mod criterion;
pub mod decode;
mod driver;
mod steps;

use std::collections::BTreeMap;
use std::env::consts::{ARCH, OS};
use std::path::PathBuf;

use anyhow::{bail, Result};
use fs_err as fs;
use shared::{CONTROL_POINT, PUBLISHED_POINT, SERIES_POINT};

use crate::project::Layout;
use crate::report::data::{self, Report, Step};
use crate::report::{data_path, forest, patch_hashes, render, Row, FULL_BENCH, MARKDOWN};
use crate::series::Series;
pub use criterion::{read_criterion, rows, Measurement};
use decode::Loop;
use driver::Driver;
use steps::weigh_rows;
pub use steps::{decode_points, faster, per_call, steps, whole_series, Counts, PointRounds};

/// The criterion run before a short report (the real vocabulary only).
pub const SHORT_BENCH: &str = "cargo bench --bench bench_main -- --quick --noplot /49152";

/// How many paired rounds `bench-driver pair` times per row.
pub const ROUNDS: usize = 201;
/// About how long each side's calls take in one round, in nanoseconds.
const ROUND_NS: f64 = 2e6;
/// The two call counts that callgrind runs each side with: their difference cancels the setup.
const COUNTED_CALLS: [u64; 2] = [4, 16];
/// How many paired rounds of the decode loop `bench-report` runs per comparison.
pub const DECODE_ROUNDS: usize = 11;

#[derive(Debug, Default, clap::Args)]
pub struct Options {
    /// Count instructions per call with valgrind's callgrind too.
    #[arg(long)]
    pub callgrind: bool,
    /// The short run: every step's verdict at the real vocabulary, and no other vocabulary and
    /// no decode loop (after `cargo bench --bench bench_main -- --quick --noplot /49152`).
    #[arg(long)]
    pub short: bool,
}

pub fn run(layout: &Layout, options: &Options) -> Result<()> {
    let measured = measure(layout, options)?;
    let wrote = write(layout, &measured)?;
    print!("{}", wrote.markdown);
    eprintln!("{wrote}");
    Ok(())
}

/// What a run measured: criterion's rows, the report with every step, the whole series' step
/// (the forest plot's first panel), and the CPU profile's medians.
struct Measured {
    rows: Vec<Row>,
    report: Report,
    whole: Step,
    profile: Vec<(String, f64)>,
}

/// The decode loop of each comparison in `comparisons`: the whole series' rows, returned, and
/// each faster step's, added to its step.
fn decode_loop<'a>(
    driver: &Driver,
    comparisons: impl Iterator<Item = &'a String>,
    patches: &mut [Step],
) -> Result<Vec<data::Decode>> {
    let mut whole = Vec::new();
    for comparison in comparisons {
        let points = decode_points(comparison, patches);
        let decode = Loop {
            comparison: comparison.clone(),
            rounds: driver.decode(comparison, &points)?,
            points,
            tokens: driver.settings.decode_tokens,
        };
        whole.push(decode.between(PUBLISHED_POINT, SERIES_POINT)?);
        for step in patches.iter_mut().filter(|step| faster(step, comparison)) {
            step.decode.push(decode.between(&step.before, &step.after)?);
        }
    }
    Ok(whole)
}

/// What `write` wrote: the report's Markdown, which `run` prints, and each file's path
/// (`Display`).
struct Wrote {
    markdown: String,
    paths: Vec<PathBuf>,
}

impl std::fmt::Display for Wrote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let paths: Vec<String> = self.paths.iter().map(|p| p.display().to_string()).collect();
        write!(f, "wrote {}", paths.join(", "))
    }
}

/// Builds and runs `bench-driver` (and callgrind, and the decode loop) over criterion's results.
fn measure(layout: &Layout, options: &Options) -> Result<Measured> {
    let dir = layout.target().join("criterion");
    let shown = dir.display();
    if !dir.is_dir() {
        bail!("no criterion results in {shown}: run `cargo bench` first");
    }
    let measurements = read_criterion(&dir)?;
    let mut rows = rows(&measurements);
    if rows.is_empty() {
        bail!("{shown} has no published/series pairs: run `cargo bench`");
    }
    let driver = Driver::build(layout)?;
    let settings = &driver.settings;
    let real_vocab = settings.vocab.to_string();
    // A short run measures the real vocabulary alone, whatever an earlier full run left.
    if options.short {
        rows.retain(|row| row.device == "cpu" && row.vocab == real_vocab);
        if rows.is_empty() {
            bail!("{shown} has no CPU pairs at {real_vocab} tokens: run `{SHORT_BENCH}`");
        }
    }
    // The series' patches, each against the point it builds on, not measured yet.
    let series = Series::load(&layout.patches())?;
    let builds_on = &series.stack.builds_on;
    let mut patches = Vec::new();
    for p in &series.patches {
        let before = builds_on.get(p.number()).map_or(PUBLISHED_POINT, |b| b);
        patches.push(Step::new(p.number(), &p.message.subject, before));
    }
    // Every point at the real vocabulary on the CPU, the published point and its control first;
    // elsewhere those two and the whole series, so that every row has its A/A pair.
    let ends = [PUBLISHED_POINT, CONTROL_POINT, SERIES_POINT].map(String::from);
    let numbers: Vec<String> = patches.iter().map(|p| p.after.clone()).collect();
    let all = [&ends[..2], &numbers, &ends[2..]].concat();
    if let Some(point) = all.iter().find(|point| !settings.points.contains(point)) {
        let has = settings.points.join(", ");
        bail!("bench-driver has no point {point} (it has {has}): run `cargo xtask vendor`");
    }
    let mut point_rounds: BTreeMap<String, PointRounds> = BTreeMap::new();
    for row in &mut rows {
        let at_real = row.device == "cpu" && row.vocab == real_vocab;
        let measured = driver.pairs(row, if at_real { &all[..] } else { &ends[..] })?;
        if at_real {
            point_rounds.insert(row.comparison.clone(), measured);
        }
    }
    let mut counts = Counts::new();
    if options.callgrind {
        counts = driver.count_instructions(&point_rounds, &real_vocab)?;
        weigh_rows(&mut rows, &counts, &real_vocab);
    }
    let mut control = Step::control();
    steps(&mut control, &mut patches, &point_rounds, &counts);
    let whole = whole_series(&control, &point_rounds, &counts);
    let tokens = settings.decode_tokens;
    // Without the model on disk, the report has no decode loop, which it says.
    let decode = if settings.model_on_disk && !options.short {
        Some(decode_loop(&driver, point_rounds.keys(), &mut patches)?)
    } else {
        None
    };
    let report = Report {
        version: data::VERSION,
        machine: machine(),
        date: time::OffsetDateTime::now_utc().date().to_string(),
        commit: commit(layout)?,
        crate_label: crate::pin::label(&crate::pin::read(&layout.pin())?),
        model: settings.model.clone(),
        vocab: settings.vocab,
        seed: settings.seed,
        temperature: settings.temperature,
        rounds: ROUNDS,
        short: options.short,
        commands: commands(options),
        patch_hashes: patch_hashes(&series),
        stale: Vec::new(),
        decode_tokens: tokens,
        decode_rounds: DECODE_ROUNDS,
        control,
        patches,
        decode,
    };
    let profile: Vec<(String, f64)> = measurements
        .iter()
        .filter(|m| m.group == "cpu_profile")
        .map(|m| (m.function.clone(), m.median_ns))
        .collect();
    Ok(Measured {
        rows,
        report,
        whole,
        profile,
    })
}

/// Writes the report of `measured` in `docs/report/`: every file rendered before the first is
/// written, and each written whole.
fn write(layout: &Layout, measured: &Measured) -> Result<Wrote> {
    let Measured {
        rows,
        report,
        whole,
        profile,
    } = measured;
    let markdown = render::report(rows, report, profile)?;
    let data = serde_json::to_string_pretty(report)? + "\n";
    let svg = forest::report_svg(report, whole)?;
    let dir = layout.report_dir();
    fs::create_dir_all(&dir)?;
    let files = [
        (dir.join(MARKDOWN), markdown.as_str()),
        (data_path(layout), data.as_str()),
        (dir.join(forest::SVG), svg.as_str()),
    ];
    for (path, text) in &files {
        crate::fsutil::write_whole(path, text)?;
    }
    let paths = files.into_iter().map(|(path, _)| path).collect();
    Ok(Wrote { markdown, paths })
}

/// The commands of a run with `options`, as the report names them.
fn commands(options: &Options) -> Vec<String> {
    let bench = if options.short {
        SHORT_BENCH
    } else {
        FULL_BENCH
    };
    let flags = [
        (options.callgrind, " --callgrind"),
        (options.short, " --short"),
    ];
    let flags: String = flags.iter().filter(|f| f.0).map(|f| f.1).collect();
    vec![
        bench.to_string(),
        format!("cargo xtask bench-report{flags}"),
    ]
}

/// The processor, its threads and the system.
fn machine() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo.lines().find_map(|l| l.strip_prefix("model name"));
    let cpu = cpu.map(|n| n.trim_start_matches([' ', '\t', ':']));
    let cpu = cpu.unwrap_or("unknown processor");
    let threads = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {threads} threads, {OS} {ARCH}")
}

/// The workspace's commit, and whether its tree had uncommitted changes.
fn commit(layout: &Layout) -> Result<String> {
    let Ok(repo) = git2::Repository::discover(&layout.root) else {
        return Ok("unknown".to_string());
    };
    let head = repo.head()?.peel_to_commit()?.id().to_string();
    let mut label = crate::git::short(&head).to_string();
    if !crate::git::uncommitted(&repo, None)?.is_empty() {
        label += " with uncommitted changes";
    }
    Ok(label)
}
