//! The GGUF's tokenizer (gpt2 byte-level BPE, llama.cpp's `smollm` pre-tokenizer) and chat
//! template. Not candle's `TokenizerFromGguf`, which treats `smollm` as plain GPT-2 and adds a
//! space after every special token (`Ġuser`), shifting the ids and logits (tests/testsuite/tokenizer.rs).

use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};
use candle::quantized::gguf_file::{Content, Value};
use serde::{Deserialize, Serialize};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab as BpeVocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer};

/// The GGUF's `tokenizer.*` metadata that the tokenizer and the chat template need.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Vocab {
    pub model: String,
    pub pre: String,
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.merges`, each "left right".
    pub merges: Vec<String>,
    /// Control (`token_type` 3) and user-defined (4) tokens, matched in text as one token each.
    pub special_ids: Vec<u32>,
    pub add_bos_token: bool,
    pub add_space_prefix: bool,
    pub eos_token_id: u32,
    pub chat_template: String,
}

/// The committed copy of SmolLM2's vocabulary, written by `cargo repro --save-fixture`.
pub fn fixture_path() -> PathBuf {
    testbed::fixture::dir().join("smollm2-vocab.json")
}

fn get<'a>(content: &'a Content, key: &str) -> Result<&'a Value> {
    content
        .metadata
        .get(key)
        .with_context(|| format!("the GGUF has no `{key}`"))
}

fn strings(content: &Content, key: &str) -> Result<Vec<String>> {
    get(content, key)?
        .to_vec()?
        .iter()
        .map(|v| Ok(v.to_string()?.clone()))
        .collect::<candle::Result<_>>()
        .with_context(|| format!("`{key}` is not a list of strings"))
}

impl Vocab {
    pub fn from_gguf(content: &Content) -> Result<Vocab> {
        let mut special_ids = Vec::new();
        let token_types = get(content, "tokenizer.ggml.token_type")?.to_vec()?;
        for (id, v) in token_types.iter().enumerate() {
            match v.to_i32().map(|t| t as u32).or_else(|_| v.to_u32())? {
                1 => {}
                3 | 4 => special_ids.push(id as u32),
                other => {
                    bail!("token {id} has token_type {other}, which this tokenizer does not read")
                }
            }
        }
        let string = |key| Ok::<_, anyhow::Error>(get(content, key)?.to_string()?.clone());
        let flag = |key| get(content, key).and_then(|v| Ok(v.to_bool()?));
        Ok(Vocab {
            model: string("tokenizer.ggml.model")?,
            pre: string("tokenizer.ggml.pre")?,
            tokens: strings(content, "tokenizer.ggml.tokens")?,
            merges: strings(content, "tokenizer.ggml.merges")?,
            special_ids,
            add_bos_token: flag("tokenizer.ggml.add_bos_token").unwrap_or(false),
            add_space_prefix: flag("tokenizer.ggml.add_space_prefix").unwrap_or(false),
            eos_token_id: get(content, "tokenizer.ggml.eos_token_id")?.to_u32()?,
            chat_template: string("tokenizer.chat_template")?,
        })
    }

    pub fn load(path: &Path) -> Result<Vocab> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("in {}", path.display()))
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_string(self)? + "\n";
        std::fs::write(path, json).with_context(|| format!("cannot write {}", path.display()))
    }

    /// The chat template's text for one user turn followed by the assistant's prompt, rendered
    /// as Hugging Face's `apply_chat_template` renders it (`trim_blocks`, `lstrip_blocks`).
    pub fn chat(&self, user: &str) -> Result<String> {
        let mut env = minijinja::Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.add_template("chat", &self.chat_template)?;
        Ok(env.get_template("chat")?.render(minijinja::context! {
            messages => vec![minijinja::context! { role => "user", content => user }],
            add_generation_prompt => true,
        })?)
    }

    /// A tokenizer that splits text as llama.cpp does for this vocabulary: special tokens first,
    /// then (smollm) every digit alone, then GPT-2's byte-level pieces without a prefix space.
    pub fn tokenizer(&self) -> Result<Tokenizer> {
        let (model, pre) = (&self.model, &self.pre);
        let (space, bos) = (self.add_space_prefix, self.add_bos_token);
        ensure!(
            model == "gpt2" && pre == "smollm" && !space && !bos,
            "only SmolLM2's tokenizer is supported (gpt2 model, smollm pre-tokenizer, no space \
             prefix, no BOS), got model {model} pre {pre} add_space_prefix {space} add_bos_token \
             {bos}"
        );
        let vocab: BpeVocab = self.tokens.iter().cloned().zip(0..).collect();
        let merges = self
            .merges
            .iter()
            .map(|merge| match merge.split_once(' ') {
                Some((left, right)) => Ok((left.to_string(), right.to_string())),
                None => bail!("merge `{merge}` is not two tokens"),
            })
            .collect::<Result<Vec<_>>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(anyhow::Error::msg)?;
        let mut tokenizer = Tokenizer::new(bpe);
        tokenizer.with_pre_tokenizer(Some(Sequence::new(vec![
            Digits::new(true).into(),
            ByteLevel::new(false, true, true).into(),
        ])));
        tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
        let specials = self
            .special_ids
            .iter()
            .map(|&id| AddedToken::from(self.tokens[id as usize].clone(), true));
        tokenizer
            .add_special_tokens(specials)
            .map_err(anyhow::Error::msg)?;
        Ok(tokenizer)
    }
}

/// `text`'s token ids, special tokens matched.
pub fn encode(tokenizer: &Tokenizer, text: &str) -> Result<Vec<u32>> {
    let encoding = tokenizer.encode(text, false).map_err(anyhow::Error::msg)?;
    Ok(encoding.get_ids().to_vec())
}

/// The text of `ids`, special tokens included.
pub fn decode(tokenizer: &Tokenizer, ids: &[u32]) -> Result<String> {
    tokenizer.decode(ids, false).map_err(anyhow::Error::msg)
}

/// The text of one token, special tokens included.
pub fn token_text(tokenizer: &Tokenizer, id: u32) -> String {
    decode(tokenizer, &[id]).unwrap_or_else(|_| format!("<token {id}>"))
}
