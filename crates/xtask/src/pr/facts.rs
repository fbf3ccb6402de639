//! What `pr` computes for the notes' markers: the call sites (from the clone), the real-model
//! table (from `cargo repro --format json`) and the benchmark table (from
//! `cargo xtask bench-report`). Each tool hands its results over as data.

use anyhow::{Context, Result};

use super::audit::CallSite;
use super::notes;
use crate::bench_report;
use crate::project::{self, Layout};

/// `cargo repro --format json`'s table: each case on the published crate, the patched one and
/// every point.
pub use shared::repro::Table as RealModel;

/// What `pr` computed for the markers of the notes; `None` where it could not.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub call_sites: Option<Vec<CallSite>>,
    pub real_model: Option<RealModel>,
    /// `target/bench-report.json`, written by `cargo xtask bench-report`.
    pub bench: Option<bench_report::data::Report>,
}

/// What the notes' markers stand for, computed only where a note asks for it.
pub fn compute(
    layout: &Layout,
    notes: &[notes::Notes],
    call_sites: Option<Vec<CallSite>>,
) -> Facts {
    let wants_real_model = notes.iter().any(|n| n.has(notes::Marker::RealModel));
    Facts {
        call_sites,
        real_model: wants_real_model.then(|| real_model(layout)).flatten(),
        bench: bench(layout),
    }
}

/// `cargo repro --format json`'s table, or `None` (with the reason on stderr) if it could not run.
fn real_model(layout: &Layout) -> Option<RealModel> {
    let mut repro = project::cargo();
    let output = repro
        .current_dir(&layout.root)
        .args(["repro", "--format", "json"])
        .output();
    let table = match output {
        Ok(output) if output.status.success() => {
            parse_real_model(&String::from_utf8_lossy(&output.stdout))
                .map_err(|err| format!("cargo repro --format json: {err:#}"))
        }
        Ok(output) => Err(format!(
            "cargo repro failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(err) => Err(format!("cannot run cargo repro: {err}")),
    };
    table.map_err(|err| eprintln!("{err}")).ok()
}

pub fn parse_real_model(json: &str) -> Result<RealModel> {
    serde_json::from_str(json).context("not the JSON of `cargo repro --format json`")
}

/// `target/bench-report.json`, or `None` (with the reason on stderr) if it is missing or not the
/// report's.
fn bench(layout: &Layout) -> Option<bench_report::data::Report> {
    let path = bench_report::data_path(layout);
    let text = std::fs::read_to_string(&path).ok()?;
    let report = bench_report::data::Report::parse(&text).map_err(|err| {
        eprintln!(
            "{} is not what this `cargo xtask bench-report` writes ({err}): run it again",
            path.display()
        )
    });
    report.ok()
}
