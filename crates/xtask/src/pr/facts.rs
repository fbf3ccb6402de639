//! What `pr` computes for the notes' markers: the call sites (from the clone), the real-model
//! table (from `cargo repro --format json`) and the benchmark table (from
//! `cargo xtask bench-report`). Each tool hands its results over as data.

use anyhow::{Context, Result};

use super::audit::CallSite;
use super::notes;
use crate::bench_report;
use crate::project::{self, Layout};

/// `cargo repro --format json`'s table: each case, before and after the patches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RealModel {
    /// The model file and the package it comes from.
    pub model: String,
    /// `model` when computed by the model now, `fixture` when read from the committed logits.
    pub logits: String,
    pub prompt: String,
    pub seed: u64,
    /// The case, the published crate's outcome, the patched crate's outcome.
    pub rows: Vec<[String; 3]>,
}

/// What `pr` computed for the markers of the notes; `None` where it could not.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub call_sites: Option<Vec<CallSite>>,
    pub real_model: Option<RealModel>,
    /// `target/bench-report.json`, written by `cargo xtask bench-report`.
    pub bench: Option<serde_json::Value>,
}

/// What the notes' markers stand for, computed only where a note asks for it.
pub fn compute(
    layout: &Layout,
    notes: &[notes::Notes],
    call_sites: Option<Vec<CallSite>>,
) -> Facts {
    let wants = |marker| notes.iter().any(|n| n.markers().any(|m| m == marker));
    Facts {
        call_sites,
        real_model: wants(notes::Marker::RealModel)
            .then(|| real_model(layout))
            .flatten(),
        bench: std::fs::read_to_string(bench_report::data_path(layout))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok()),
    }
}

/// `cargo repro --format json`'s table, or `None` (with the reason on stderr) if it could not run.
fn real_model(layout: &Layout) -> Option<RealModel> {
    let output = project::cargo()
        .current_dir(&layout.root)
        .args(["repro", "--format", "json"])
        .output();
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => {
            eprintln!(
                "cargo repro failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
            return None;
        }
        Err(err) => {
            eprintln!("cannot run cargo repro: {err}");
            return None;
        }
    };
    match parse_real_model(&String::from_utf8_lossy(&output.stdout)) {
        Ok(table) => Some(table),
        Err(err) => {
            eprintln!("cargo repro --format json: {err:#}");
            None
        }
    }
}

pub fn parse_real_model(json: &str) -> Result<RealModel> {
    let value: serde_json::Value = serde_json::from_str(json).context("not JSON")?;
    let text = |v: &serde_json::Value, key: &str| -> Result<String> {
        v[key]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("no string `{key}`"))
    };
    let rows = value["rows"]
        .as_array()
        .context("no `rows`")?
        .iter()
        .map(|row| {
            Ok([
                text(row, "case")?,
                text(row, "upstream")?,
                text(row, "patched")?,
            ])
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RealModel {
        model: text(&value, "model")?,
        logits: text(&value, "logits")?,
        prompt: text(&value, "prompt")?,
        seed: value["seed"].as_u64().context("no number `seed`")?,
        rows,
    })
}
