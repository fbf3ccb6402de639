//! The decode loop: SmolLM2 generating tokens on the CPU, each picked by one side's sampler.

use std::time::{Duration, Instant};

use crate::model::{Checkpoint, Model};
use anyhow::Result;
use candle::{Device, Tensor};
use testbed::sampler::Processor;

pub const TOKENS: usize = 16;

pub struct DecodeLoop {
    model: Model,
    prompt: Vec<u32>,
    /// The model after the prompt's prefill, its cache included, and the logits that follow the
    /// prompt: every generation starts from them, so the prompt is read once, not once a
    /// generation. The prefill is deterministic, so the tokens are the same either way.
    prefilled: Checkpoint,
    first: Tensor,
}

/// One generation: its tokens, the time of all decode steps and the part of it in `sample`.
#[derive(Clone, Debug)]
pub struct Generation {
    pub tokens: Vec<u32>,
    pub total: Duration,
    pub sampler: Duration,
}

/// Why the decode loop cannot run here, for the bench's and the report's "skipped" line.
pub const NEEDS_THE_MODEL: &str = "needs the model: bash ci/fetch-model.sh";

impl DecodeLoop {
    /// The model from `target/model/`, or `None` when it is not there.
    pub fn load() -> Result<Option<DecodeLoop>> {
        let Some(path) = testbed::model::find() else {
            return Ok(None);
        };
        let mut model = Model::load(&path, &Device::Cpu)?;
        let (_, prompt) = model.prompt(testbed::fixture::PROMPT)?;
        let first = model.forward(&prompt, 0)?;
        Ok(Some(DecodeLoop {
            prefilled: model.checkpoint(),
            model,
            prompt,
            first,
        }))
    }

    /// `tokens` tokens after the prompt, each the one `processor` samples from the last logits,
    /// timed from the first `sample` to the last forward pass (the prefill is not timed). The
    /// end-of-sequence token does not stop it, so that every generation does the same work.
    pub fn generate(&mut self, processor: &mut Processor, tokens: usize) -> Result<Generation> {
        self.model.restore(&self.prefilled);
        let mut logits = self.first.clone();
        let mut generated = Vec::with_capacity(tokens);
        let mut sampler = Duration::ZERO;
        let start = Instant::now();
        for position in self.prompt.len()..self.prompt.len() + tokens {
            let sampled = Instant::now();
            let token = processor.sample(&logits)?;
            sampler += sampled.elapsed();
            generated.push(token);
            logits = self.model.forward(&[token], position)?;
        }
        Ok(Generation {
            tokens: generated,
            total: start.elapsed(),
            sampler,
        })
    }
}
