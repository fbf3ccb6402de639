//! Running what the report measures: `bench-driver`'s paired rounds and decode loop, and
//! callgrind's instruction counts.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};
use fs_err as fs;
use shared::bench::Settings;
use shared::{CONTROL_POINT, PUBLISHED_POINT, SERIES_POINT};

use super::{per_call, Counts, PointRounds, COUNTED_CALLS, DECODE_ROUNDS, ROUNDS, ROUND_NS};
use crate::cmd::{self, stdout_of};
use crate::project::Layout;
use crate::report::stats::{self, parse_rounds, Paired};
use crate::report::Row;

/// `bench-driver`, what it runs with, and cargo's target folder, where its output is kept.
pub(super) struct Driver {
    path: PathBuf,
    pub(super) settings: Settings,
    target: PathBuf,
}

impl Driver {
    /// Builds `bench-driver` as `cargo bench` builds the benches: by target name, so that cargo
    /// resolves features over the workspace as `cargo bench` does, and reuses its candle.
    pub(super) fn build(layout: &Layout) -> Result<Driver> {
        let mut build = cmd::cargo();
        build
            .current_dir(&layout.root)
            .args(["build", "--release", "-q"])
            .args(["--bin", "bench-driver"]);
        cmd::run_checked(&mut build, "cannot build bench-driver")?;
        let target = layout.target();
        let path = target.join("release").join("bench-driver");
        let json = stdout_of("bench-driver settings", Command::new(&path).arg("settings"))?;
        let settings = serde_json::from_str(&json);
        let settings = settings.context("bench-driver settings: not the settings' JSON")?;
        Ok(Driver {
            path,
            settings,
            target,
        })
    }

    /// Runs it with `args` then `points`, and keeps what it printed in `target/bench-driver/`,
    /// named after the arguments, so that a report's numbers can be traced to their rounds.
    fn rounds(&self, args: &[&str], points: &[String]) -> Result<String> {
        let line = format!("{} {}", args.join(" "), points.join(" "));
        let name = format!("bench-driver {line}");
        let output = stdout_of(&name, Command::new(&self.path).args(args).args(points))?;
        let trace = self.target.join("bench-driver");
        fs::create_dir_all(&trace)?;
        fs::write(trace.join(format!("{line}.txt")), &output)?;
        Ok(output)
    }

    /// `ROUNDS` rounds of about `ROUND_NS` of calls on each of `points` for `row`: sets its paired
    /// ratio, series over published, and its A/A pair, control over published, and returns each
    /// point's time of one call per round.
    pub(super) fn pairs(&self, row: &mut Row, points: &[String]) -> Result<PointRounds> {
        let (device, comparison, vocab) = (&row.device, &row.comparison, &row.vocab);
        let calls = (ROUND_NS / row.published_ns).round().clamp(1.0, 2000.0) as u64;
        let (rounds, count) = (ROUNDS.to_string(), calls.to_string());
        let args = ["pair", comparison, vocab, &rounds, &count, device];
        let measured = per_call(points, &self.rounds(&args, points)?, calls)?;
        let side = |name: &str| {
            let rounds = measured.get(name);
            rounds.with_context(|| format!("{comparison}: the point {name} could not run"))
        };
        let paired = Paired::between(side(PUBLISHED_POINT)?, side(SERIES_POINT)?);
        let control = Paired::between(side(PUBLISHED_POINT)?, side(CONTROL_POINT)?);
        let (interval, verdict) = (paired.interval(), paired.verdict_text());
        let aa = control.interval();
        eprintln!("{device} {comparison} {vocab}: series {interval}, {verdict}; control {aa}");
        row.paired = Some(paired);
        row.control = Some(control);
        Ok(measured)
    }

    /// Instructions per call of each point in `timed`, by comparison, at the vocabulary `vocab`:
    /// each runs under callgrind once per count of `COUNTED_CALLS`, so that the setup cancels out.
    pub(super) fn count_instructions(
        &self,
        timed: &BTreeMap<String, PointRounds>,
        vocab: &str,
    ) -> Result<Counts> {
        let out = self.target.join("callgrind");
        fs::create_dir_all(&out)?;
        let mut counts = Counts::new();
        for (comparison, points) in timed {
            for point in points.keys() {
                let total = |calls: u64| -> Result<f64> {
                    let file = out.join(format!("{comparison}-{point}-{calls}.out"));
                    let mut valgrind = Command::new("valgrind");
                    valgrind
                        .arg("--tool=callgrind")
                        .arg(format!("--callgrind-out-file={}", file.display()))
                        .arg(&self.path)
                        .args(["count", point, comparison, vocab, &calls.to_string()])
                        .env("RAYON_NUM_THREADS", "1");
                    stdout_of("valgrind --tool=callgrind", &mut valgrind)?;
                    Ok(stats::callgrind_total(&fs::read_to_string(&file)?)? as f64)
                };
                let [few, many] = COUNTED_CALLS;
                let per_call = (total(many)? - total(few)?) / (many - few) as f64;
                eprintln!("callgrind {comparison} {point}: {per_call:.0} instructions per call");
                counts.insert((comparison.clone(), point.clone()), per_call);
            }
        }
        Ok(counts)
    }

    /// `bench-driver decode`'s rounds for `comparison` on `points`: per round, each point's total
    /// and sampler time.
    pub(super) fn decode(&self, comparison: &str, points: &[String]) -> Result<Vec<Vec<f64>>> {
        let rounds = DECODE_ROUNDS.to_string();
        let count = self.settings.decode_tokens.to_string();
        let output = self.rounds(&["decode", comparison, &rounds, &count], points)?;
        eprintln!("decode {comparison}: {} measured", points.join(", "));
        parse_rounds(&output, 2 * points.len())
    }
}
