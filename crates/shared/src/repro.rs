//! What `cargo repro --format json` prints and `cargo xtask pr` reads: one type for both.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The bug report's cases and what they ran on, without a local path: it goes into pull requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    /// The model file and the package it comes from.
    pub model: String,
    pub model_sha256: String,
    pub prompt: String,
    /// `model` when computed by the model now, `fixture` when read from the committed logits.
    pub logits: String,
    pub seed: u64,
    pub rows: Vec<Row>,
}

/// One case: what the published and patched crates and every point sample, as text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub case: String,
    pub upstream: String,
    pub patched: String,
    /// By point name: `published`, a patch's number, `series`.
    pub points: BTreeMap<String, String>,
}
