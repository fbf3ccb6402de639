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

/// The parts of criterion's `benchmark.json` and `sample.json` read here.
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

fn read<T: serde::de::DeserializeOwned>(path: PathBuf) -> Result<T> {
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not criterion's JSON", path.display()))
}

/// Every benchmark under criterion's folder (`target/criterion`), from each `new/` folder that
/// holds a `benchmark.json`.
pub fn read_criterion(dir: &Path) -> Result<Vec<Measurement>> {
    let (mut dirs, mut runs) = (vec![dir.to_path_buf()], Vec::new());
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))?;
        for entry in entries {
            let path = entry?.path();
            let name = path.file_name().unwrap_or_default();
            if !path.is_dir() || name == "report" || name == "base" {
                continue;
            }
            match name == "new" && path.join("benchmark.json").is_file() {
                true => runs.push(path),
                false => dirs.push(path),
            }
        }
    }
    runs.sort();
    runs.into_iter()
        .map(|run| {
            let benchmark: Benchmark = read(run.join("benchmark.json"))?;
            let sample: Sample = read(run.join("sample.json"))?;
            let estimates = run.join("estimates.json");
            let median = read::<serde_json::Value>(estimates.clone())?["median"]["point_estimate"]
                .as_f64()
                .with_context(|| format!("{} is not criterion's JSON", estimates.display()))?;
            if sample.iters.len() != sample.times.len() || sample.iters.is_empty() {
                bail!(
                    "{}: sample.json's iters and times do not pair up",
                    run.display()
                );
            }
            let times = sample.times.iter().zip(&sample.iters);
            Ok(Measurement {
                group: benchmark.group_id,
                function: benchmark.function_id.unwrap_or_default(),
                value: benchmark.value_str,
                per_iteration_ns: times.map(|(t, i)| t / i).collect(),
                criterion_median_ns: median,
            })
        })
        .collect()
}
