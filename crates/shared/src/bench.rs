//! What `bench-driver settings` prints and `cargo xtask bench-report` reads: one type for both.

use serde::{Deserialize, Serialize};

/// The k and p of the benches' `TopK`, `TopP` and `TopKThenTopP`; the report names them.
pub const TOP_K: usize = 40;
pub const TOP_P: f64 = 0.9;

/// What the benches run with; the benches decide it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The model file whose logits the benches sample from.
    pub model: String,
    /// The real logits' vocabulary; the other sizes are drawn from them.
    pub vocab: u64,
    pub seed: u64,
    pub temperature: f64,
    /// Every point that `bench-driver` can time (`points::NAMES`).
    pub points: Vec<String>,
    /// How many tokens one generation of the decode loop decodes.
    pub decode_tokens: u64,
    /// Whether the model is on disk, so that the decode loop can run.
    pub model_on_disk: bool,
}
