//! Running what the report measures: `bench-driver`'s paired rounds and decode loop, and
//! callgrind's instruction counts; and the facts a run is labelled with (machine, commit).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use shared::bench::Settings;
use shared::{PUBLISHED_POINT, SERIES_POINT};

use crate::project::{self, Layout};

use super::stats::{self, parse_rounds, Paired};
use super::{per_call, Counts, PointRounds, Row, COUNTED_CALLS, DECODE_ROUNDS, ROUNDS, ROUND_NS};

/// `bench-driver`, built as `cargo bench` builds the benches.
pub(super) fn build_driver(layout: &Layout) -> Result<PathBuf> {
    let status = project::cargo()
        .current_dir(&layout.root)
        .args(["build", "--release", "-q"])
        .args(["-p", "benches", "--bin", "bench-driver"])
        .status()?;
    if !status.success() {
        bail!("cannot build bench-driver");
    }
    Ok(layout.target().join("release").join("bench-driver"))
}

/// Runs `bench-driver` with `args` then `points`, and keeps what it printed in
/// `target/bench-driver/`, named after the arguments, so that a report's numbers can be traced to
/// their rounds.
fn driver_rounds(
    layout: &Layout,
    driver: &Path,
    args: &[String],
    points: &[String],
) -> Result<String> {
    let all = [args, points].concat();
    let args = all.join(" ");
    let output = stdout_of(
        &format!("bench-driver {args}"),
        std::process::Command::new(driver).args(&all),
    )?;
    let dir = layout.target().join("bench-driver");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(format!("{args}.txt")), &output)?;
    Ok(output)
}

/// `ROUNDS` rounds of about `ROUND_NS` of calls on each of `points` for `row`: sets its paired
/// ratio, series over published, and returns each point's time of one call per round.
pub(super) fn measure_pairs(
    layout: &Layout,
    driver: &Path,
    row: &mut Row,
    points: &[String],
) -> Result<PointRounds> {
    let calls = (ROUND_NS / row.published_ns).round().clamp(1.0, 2000.0) as u64;
    let args = [
        "pair".to_string(),
        row.comparison.clone(),
        row.vocab.clone(),
        ROUNDS.to_string(),
        calls.to_string(),
        row.device.clone(),
    ];
    let output = driver_rounds(layout, driver, &args, points)?;
    let by_point = per_call(points, &output, calls)?;
    let side = |name: &str| {
        by_point
            .get(name)
            .with_context(|| format!("{}: the point {name} could not run", row.comparison))
    };
    let pairs: Vec<(f64, f64)> = side(PUBLISHED_POINT)?
        .iter()
        .copied()
        .zip(side(SERIES_POINT)?.iter().copied())
        .collect();
    let paired = Paired::of(&pairs);
    eprintln!(
        "{} {} {}: series {}, {}",
        row.device,
        row.comparison,
        row.vocab,
        paired.interval(),
        paired.verdict_text()
    );
    row.paired = Some(paired);
    Ok(by_point)
}

/// `bench-driver decode`'s rounds for `comparison` on `points`: per round, each point's total
/// and sampler time.
pub(super) fn measure_decode(
    layout: &Layout,
    driver: &Path,
    comparison: &str,
    points: &[String],
    settings: &Settings,
) -> Result<Vec<Vec<f64>>> {
    let tokens = settings.decode_tokens;
    let args = [
        "decode".to_string(),
        comparison.to_string(),
        DECODE_ROUNDS.to_string(),
        tokens.to_string(),
    ];
    let output = driver_rounds(layout, driver, &args, points)?;
    eprintln!("decode {comparison}: {} measured", points.join(", "));
    parse_rounds(&output, 2 * points.len())
}

/// Instructions per call of each point that was timed for each CPU comparison at the real
/// vocabulary (`timed`): each point's loop runs under callgrind once per count of
/// `COUNTED_CALLS`, so that the setup cancels out.
pub(super) fn count_instructions(
    layout: &Layout,
    driver: &Path,
    timed: &BTreeMap<String, PointRounds>,
    vocab: &str,
) -> Result<Counts> {
    let out = layout.target().join("callgrind");
    std::fs::create_dir_all(&out)?;
    let mut counts = Counts::new();
    for (comparison, points) in timed {
        for point in points.keys() {
            let mut totals = Vec::new();
            for calls in COUNTED_CALLS {
                let file = out.join(format!("{comparison}-{point}-{calls}.out"));
                stdout_of(
                    "valgrind --tool=callgrind",
                    std::process::Command::new("valgrind")
                        .arg("--tool=callgrind")
                        .arg(format!("--callgrind-out-file={}", file.display()))
                        .arg(driver)
                        .args(["count", point, comparison, vocab, &calls.to_string()])
                        .env("RAYON_NUM_THREADS", "1"),
                )?;
                totals.push(stats::callgrind_total(&std::fs::read_to_string(&file)?)?);
            }
            let extra_calls = COUNTED_CALLS[1] - COUNTED_CALLS[0];
            let per_call = (totals[1] as f64 - totals[0] as f64) / extra_calls as f64;
            eprintln!("callgrind {comparison} {point}: {per_call:.0} instructions per call");
            counts.insert((comparison.clone(), point.clone()), per_call);
        }
    }
    Ok(counts)
}

/// What `command` prints, or an error with what it said on stderr; `name` says what ran.
pub(super) fn stdout_of(name: &str, command: &mut std::process::Command) -> Result<String> {
    let output = command
        .output()
        .with_context(|| format!("cannot run {name}"))?;
    if !output.status.success() {
        bail!("{name} failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The processor, its threads and the system.
pub(super) fn machine() -> String {
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
    format!(
        "{cpu}, {threads} threads, {} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// The workspace's commit, and whether its tree had uncommitted changes.
pub(super) fn commit(layout: &Layout) -> Result<String> {
    Ok(match git2::Repository::discover(&layout.root) {
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
    })
}
