//! The report's scenario on a real model: SmolLM2-135M-Instruct loaded with candle, its
//! tokenizer and chat template taken from the GGUF, and the logits it gives for a prompt.

pub mod decode;
pub mod model;
pub mod vocab;
