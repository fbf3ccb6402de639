//! The report's scenario on SmolLM2-135M-Instruct: the model, its GGUF tokenizer, its logits.

pub mod decode;
pub mod model;
pub mod vocab;
