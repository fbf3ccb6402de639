//! criterion's saved measurements (`target/criterion`), read as criterion reads them.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

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

/// The parts of criterion's `benchmark.json`, `sample.json` and `estimates.json` read here.
#[derive(Deserialize)]
struct Benchmark {
    group_id: String,
    function_id: Option<String>,
    value_str: Option<String>,
}

#[derive(Deserialize)]
struct Sample {
    iters: Vec<f64>,
    times: Vec<f64>,
}

#[derive(Deserialize)]
struct Estimates {
    median: Estimate,
}

#[derive(Deserialize)]
struct Estimate {
    point_estimate: f64,
}

/// Every benchmark under criterion's folder (`target/criterion`), from each `new/` run.
pub fn read_criterion(dir: &Path) -> Result<Vec<Measurement>> {
    let mut found = Vec::new();
    collect_runs(dir, &mut found)?;
    found.sort();
    let mut measurements = Vec::new();
    for run in found {
        fn read<T: serde::de::DeserializeOwned>(path: PathBuf) -> Result<T> {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{} is not criterion's JSON", path.display()))
        }
        let benchmark: Benchmark = read(run.join("benchmark.json"))?;
        let sample: Sample = read(run.join("sample.json"))?;
        let estimates: Estimates = read(run.join("estimates.json"))?;
        if sample.iters.len() != sample.times.len() || sample.iters.is_empty() {
            bail!(
                "{}: sample.json's iters and times do not pair up",
                run.display()
            );
        }
        measurements.push(Measurement {
            group: benchmark.group_id,
            function: benchmark.function_id.unwrap_or_default(),
            value: benchmark.value_str,
            per_iteration_ns: sample
                .times
                .iter()
                .zip(&sample.iters)
                .map(|(t, i)| t / i)
                .collect(),
            criterion_median_ns: estimates.median.point_estimate,
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
