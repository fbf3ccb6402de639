//! The real logits the offline tests, the benches and `cargo repro` run on: SmolLM2's
//! last-position logits for the report's prompt, written by `cargo repro --save-fixture` with
//! their provenance, and checked against it on every load.

use std::path::{Path, PathBuf};

use candle::{Device, Result, Tensor};
use serde::{Deserialize, Serialize};

/// The fixture's name in `fixtures/`: `<name>.json` and `<name>.logits.f32le`.
pub const NAME: &str = "what-is-rust";
/// The report's prompt, the user turn the fixture's logits follow.
pub const PROMPT: &str = "What is Rust?";

/// Where a fixture's logits came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// What wrote the fixture.
    pub written_by: String,
    /// Where the model comes from, and its sha256.
    pub model: String,
    pub model_sha256: String,
    /// The user turn, the text the chat template made of it, and its token ids.
    pub prompt: String,
    pub text: String,
    pub token_ids: Vec<u32>,
    /// How the token ids were checked.
    pub tokenizer: String,
    /// What computed the logits.
    pub computed_with: String,
    pub device: String,
    /// The logits file: little-endian f32, one per vocabulary entry.
    pub logits_file: String,
    pub logits_sha256: String,
    pub stats: LogitStats,
    /// The argmax token's text.
    pub argmax_text: String,
}

/// What a person checks first in a row of logits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogitStats {
    pub count: usize,
    pub positive: usize,
    pub max: f32,
    pub min: f32,
    pub nan: usize,
    pub inf: usize,
    /// The first index of the largest value, as `Tensor::argmax` returns it.
    pub argmax: u32,
}

impl LogitStats {
    pub fn of(logits: &[f32]) -> LogitStats {
        let mut stats = LogitStats {
            count: logits.len(),
            positive: 0,
            max: f32::NEG_INFINITY,
            min: f32::INFINITY,
            nan: 0,
            inf: 0,
            argmax: 0,
        };
        for (index, &value) in logits.iter().enumerate() {
            if value.is_nan() {
                stats.nan += 1;
                continue;
            }
            stats.inf += usize::from(value.is_infinite());
            stats.positive += usize::from(value > 0.0);
            if value > stats.max {
                stats.max = value;
                stats.argmax = index as u32;
            }
            stats.min = stats.min.min(value);
        }
        stats
    }
}

#[derive(Clone, Debug)]
pub struct Fixture {
    pub provenance: Provenance,
    pub logits: Vec<f32>,
}

/// The folder of the committed fixtures.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

pub use shared::sha256_hex;

/// `bytes` as little-endian f32, as the logits file holds them; a partial last one is left out.
pub fn f32s(bytes: &[u8]) -> impl Iterator<Item = f32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// An error that names the file. Built without `Error::msg`, which would put a backtrace in
/// the message when `RUST_BACKTRACE` is set.
fn io_error(path: &Path, err: impl std::fmt::Display) -> candle::Error {
    candle::Error::Msg(format!("{}: {err}", path.display()))
}

impl Fixture {
    /// The committed fixture; fails unless its logits have the recorded sha256.
    pub fn load() -> Result<Fixture> {
        let path = dir().join(format!("{NAME}.json"));
        let text = std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
        let provenance: Provenance = serde_json::from_str(&text).map_err(|e| io_error(&path, e))?;
        let logits_path = dir().join(&provenance.logits_file);
        let bytes = std::fs::read(&logits_path).map_err(|e| io_error(&logits_path, e))?;
        let sha256 = sha256_hex(&bytes);
        if sha256 != provenance.logits_sha256 {
            let recorded = &provenance.logits_sha256;
            let message = format!(
                "has sha256 {sha256}, but {} records {recorded}: rerun `cargo repro --save-fixture`",
                path.display()
            );
            return Err(io_error(&logits_path, message));
        }
        if bytes.len() % 4 != 0 {
            return Err(io_error(&logits_path, "not a whole number of f32"));
        }
        let logits = f32s(&bytes).collect();
        Ok(Fixture { provenance, logits })
    }

    /// Writes the committed fixture, `<NAME>.json` and `<NAME>.logits.f32le`, filling in the
    /// logits file's name, its sha256 and the statistics; returns the provenance as written.
    pub fn write(mut provenance: Provenance, logits: &[f32]) -> Result<Provenance> {
        let dir = dir();
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
        provenance.logits_file = format!("{NAME}.logits.f32le");
        provenance.logits_sha256 = sha256_hex(&bytes);
        provenance.stats = LogitStats::of(logits);
        let logits_path = dir.join(&provenance.logits_file);
        std::fs::write(&logits_path, &bytes).map_err(|e| io_error(&logits_path, e))?;
        let path = dir.join(format!("{NAME}.json"));
        let json = serde_json::to_string_pretty(&provenance).map_err(candle::Error::wrap)? + "\n";
        std::fs::write(&path, json).map_err(|e| io_error(&path, e))?;
        Ok(provenance)
    }

    /// The largest absolute difference between the fixture's logits and `logits`, entry by
    /// entry.
    pub fn largest_difference(&self, logits: &[f32]) -> f32 {
        self.logits
            .iter()
            .zip(logits)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max)
    }

    /// The logits as a 1-D tensor on `device`.
    pub fn tensor(&self, device: &Device) -> Result<Tensor> {
        Tensor::from_slice(&self.logits, self.logits.len(), device)
    }
}
