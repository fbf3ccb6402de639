//! SmolLM2 from its GGUF, with candle's quantized llama.

use std::path::Path;

use anyhow::{Context, Result};
use candle::quantized::gguf_file;
use candle::{DType, Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use tokenizers::Tokenizer;

use crate::vocab::{self, Vocab};

pub struct Model {
    weights: ModelWeights,
    pub vocab: Vocab,
    pub tokenizer: Tokenizer,
    pub device: Device,
}

/// The model's weights and cache at one point: `Model::checkpoint`.
pub struct Checkpoint(ModelWeights);

impl Model {
    pub fn load(path: &Path, device: &Device) -> Result<Model> {
        let mut file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let content = gguf_file::Content::read(&mut file)
            .with_context(|| format!("{} is not a GGUF file", path.display()))?;
        let vocab = Vocab::from_gguf(&content)?;
        Ok(Model {
            tokenizer: vocab.tokenizer()?,
            weights: ModelWeights::from_gguf(content, &mut file, device)?,
            vocab,
            device: device.clone(),
        })
    }

    /// The chat template's text for the user turn `user`, and its token ids.
    pub fn prompt(&self, user: &str) -> Result<(String, Vec<u32>)> {
        let text = self.vocab.chat(user)?;
        let ids = vocab::encode(&self.tokenizer, &text)?;
        Ok((text, ids))
    }

    /// The last position's logits, as f32, after `ids` starting at `position`; from position 0,
    /// the prefill, the cache starts anew.
    pub fn forward(&mut self, ids: &[u32], position: usize) -> Result<Tensor> {
        let input = Tensor::new(ids, &self.device)?.unsqueeze(0)?;
        let logits = self.weights.forward(&input, position)?.squeeze(0)?;
        Ok(logits.to_dtype(DType::F32)?)
    }

    /// The model as it stands, its cache included; `restore` comes back to it. Its tensors are
    /// shared, not copied, and a forward pass after `restore` leaves them as they are.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint(self.weights.clone())
    }

    pub fn restore(&mut self, checkpoint: &Checkpoint) {
        self.weights = checkpoint.0.clone();
    }

    /// Up to `max_tokens` tokens after `prompt`, each chosen by `next` from the logits, ending
    /// early at the end-of-sequence token.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        max_tokens: usize,
        mut next: impl FnMut(&Tensor) -> candle::Result<u32>,
    ) -> Result<Vec<u32>> {
        let mut logits = self.forward(prompt, 0)?;
        let mut tokens = Vec::new();
        while tokens.len() < max_tokens {
            let token = next(&logits)?;
            tokens.push(token);
            if token == self.vocab.eos_token_id {
                break;
            }
            logits = self.forward(&[token], prompt.len() + tokens.len() - 1)?;
        }
        Ok(tokens)
    }
}
