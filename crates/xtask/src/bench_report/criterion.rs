//! criterion's saved samples, paired into rows per comparison and vocabulary.

use std::path::Path;

use anyhow::{bail, Context, Result};
use fs_err as fs;
use serde::Deserialize;
use shared::{PUBLISHED_POINT, SERIES_POINT};

use crate::report::stats::median;
use crate::report::Row;

/// One benchmark's samples, as criterion saved them.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub group: String,
    pub function: String,
    pub value: Option<String>,
    /// The median over the samples of one iteration's time, in nanoseconds.
    pub median_ns: f64,
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

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let shown = path.display();
    let text = fs::read_to_string(path)?;
    serde_json::from_str(&text).with_context(|| format!("{shown} is not criterion's JSON"))
}

/// Every benchmark under criterion's folder, from each `new/benchmark.json` and its `sample.json`.
pub fn read_criterion(dir: &Path) -> Result<Vec<Measurement>> {
    let dir = glob::Pattern::escape(&dir.to_string_lossy());
    let runs = glob::glob(&format!("{dir}/**/new/benchmark.json"))?;
    let runs = runs.collect::<Result<std::collections::BTreeSet<_>, _>>()?;
    runs.into_iter()
        .map(|run| {
            let benchmark: Benchmark = read(&run)?;
            let sample: Sample = read(&run.with_file_name("sample.json"))?;
            if sample.iters.len() != sample.times.len() || sample.iters.is_empty() {
                let shown = run.parent().unwrap_or(&run).display();
                bail!("{shown}: sample.json's iters and times do not pair up");
            }
            let times = sample.times.iter().zip(&sample.iters);
            Ok(Measurement {
                group: benchmark.group_id,
                function: benchmark.function_id.unwrap_or_default(),
                value: benchmark.value_str,
                median_ns: median(times.map(|(t, i)| t / i)),
            })
        })
        .collect()
}

/// Pairs each `published` measurement with the `series` and `floor` ones of its group and value.
pub fn rows(measurements: &[Measurement]) -> Vec<Row> {
    // The decode loop's groups have their own section.
    let mut rows: Vec<Row> = measurements
        .iter()
        .filter(|m| m.function == PUBLISHED_POINT && !m.group.ends_with("_decode"))
        .filter_map(|published| {
            let group = &published.group;
            let beside = |function: &str| {
                let mut same = measurements.iter().filter(|m| m.group == *group);
                same.find(|m| m.function == function && m.value == published.value)
                    .map(|m| m.median_ns)
            };
            let (device, comparison) = group.split_once('_').unwrap_or(("?", group));
            Some(Row {
                device: device.to_string(),
                comparison: comparison.to_string(),
                vocab: published.value.clone().unwrap_or_default(),
                published_ns: published.median_ns,
                series_ns: beside(SERIES_POINT)?,
                floor_ns: beside("floor"),
                ..Row::default()
            })
        })
        .collect();
    rows.sort_by_key(|row| {
        let vocab: u64 = row.vocab.parse().unwrap_or(0);
        (row.device.clone(), row.comparison.clone(), vocab)
    });
    rows
}

#[cfg(test)]
#[path = "../../tests/private/bench_report_criterion.rs"]
mod tests;
