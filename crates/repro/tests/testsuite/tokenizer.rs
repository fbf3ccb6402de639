//! The tokenizer and chat template against llama.cpp, offline: `llama-cpp-tokens.json` holds
//! llama.cpp's ids for SmolLM2's GGUF (written by the script beside it), and
//! `smollm2-vocab.json` the GGUF's vocabulary (written by `cargo repro --save-fixture`).

use std::collections::HashMap;

use anyhow::Result;
use candle::quantized::gguf_file::{Content, Value, VersionedMagic};
use candle::quantized::tokenizer::TokenizerFromGguf;
use repro::vocab::{self, Vocab};
use serde::Deserialize;
use testbed::fixture::{self, Fixture};

#[derive(Deserialize)]
struct LlamaCpp {
    model_sha256: String,
    chat: Chat,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Chat {
    text: String,
    ids: Vec<u32>,
    argmax: u32,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
}

fn llama_cpp() -> Result<LlamaCpp> {
    let path = fixture::dir().join("llama-cpp-tokens.json");
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

fn vocabulary() -> Result<Vocab> {
    Vocab::load(&vocab::fixture_path())
}

#[test]
fn ids_equal_llama_cpps() -> Result<()> {
    let reference = llama_cpp()?;
    let tokenizer = vocabulary()?.tokenizer()?;
    assert_eq!(
        vocab::encode(&tokenizer, &reference.chat.text)?,
        reference.chat.ids
    );
    for case in &reference.cases {
        assert_eq!(
            vocab::encode(&tokenizer, &case.text)?,
            case.ids,
            "{:?}",
            case.text
        );
        let decoded = tokenizer
            .decode(&case.ids, false)
            .map_err(anyhow::Error::msg)?;
        assert_eq!(decoded, case.text);
    }
    assert!(reference.cases.len() >= 10);
    Ok(())
}

#[test]
fn the_chat_template_renders_the_text_llama_cpp_tokenized() -> Result<()> {
    let text = vocabulary()?.chat(fixture::PROMPT)?;
    assert_eq!(text, llama_cpp()?.chat.text);
    // The template adds a default system turn.
    assert!(text.starts_with("<|im_start|>system\nYou are a helpful AI assistant named SmolLM"));
    assert!(text.ends_with("<|im_start|>user\nWhat is Rust?<|im_end|>\n<|im_start|>assistant\n"));
    Ok(())
}

#[test]
fn the_logits_fixture_follows_llama_cpps_ids_and_agrees_on_the_argmax() -> Result<()> {
    let reference = llama_cpp()?;
    let provenance = Fixture::load()?.provenance;
    assert_eq!(provenance.token_ids, reference.chat.ids);
    assert_eq!(provenance.text, reference.chat.text);
    assert_eq!(provenance.model_sha256, reference.model_sha256);
    assert_eq!(provenance.model_sha256, testbed::model::SHA256);
    // llama.cpp's own forward pass picks the same token as candle's.
    assert_eq!(provenance.stats.argmax, reference.chat.argmax);
    Ok(())
}

/// The GGUF metadata that candle-core's tokenizer reads, rebuilt from the vocabulary fixture.
fn gguf_content(vocab: &Vocab) -> Content {
    let strings =
        |items: &[String]| Value::Array(items.iter().map(|s| Value::String(s.clone())).collect());
    let token_types = (0..vocab.tokens.len() as u32)
        .map(|id| {
            Value::I32(if vocab.special_ids.contains(&id) {
                3
            } else {
                1
            })
        })
        .collect();
    let metadata: HashMap<String, Value> = [
        ("tokenizer.ggml.model", Value::String(vocab.model.clone())),
        ("tokenizer.ggml.pre", Value::String(vocab.pre.clone())),
        ("tokenizer.ggml.tokens", strings(&vocab.tokens)),
        ("tokenizer.ggml.merges", strings(&vocab.merges)),
        ("tokenizer.ggml.token_type", Value::Array(token_types)),
        (
            "tokenizer.ggml.add_bos_token",
            Value::Bool(vocab.add_bos_token),
        ),
        (
            "tokenizer.ggml.add_space_prefix",
            Value::Bool(vocab.add_space_prefix),
        ),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        (
            "tokenizer.ggml.eos_token_id",
            Value::U32(vocab.eos_token_id),
        ),
        ("tokenizer.ggml.unknown_token_id", Value::U32(0)),
        ("tokenizer.ggml.padding_token_id", Value::U32(2)),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), value))
    .collect();
    Content {
        magic: VersionedMagic::GgufV3,
        metadata,
        tensor_infos: HashMap::new(),
        tensor_data_offset: 0,
    }
}

/// Why this workspace has its own tokenizer: candle-core's `TokenizerFromGguf` reads `smollm`
/// as plain GPT-2, whose byte-level step puts a space before the text after each special token.
#[test]
fn candle_cores_gguf_tokenizer_differs_from_llama_cpp() -> Result<()> {
    let vocab = vocabulary()?;
    let reference = llama_cpp()?;
    let candle_tokenizer = tokenizers::Tokenizer::from_gguf(&gguf_content(&vocab))?;
    let ids = vocab::encode(&candle_tokenizer, &reference.chat.text)?;
    assert_ne!(ids, reference.chat.ids);
    let ours = vocab.tokenizer()?;
    let user = ours.token_to_id("user").unwrap();
    let space_user = ours.token_to_id("Ġuser").unwrap();
    // The user turn: llama.cpp has `<|im_start|>`, `user`; candle-core `<|im_start|>`, `Ġuser`.
    let after_second_im_start = |ids: &[u32]| {
        let im_start = ids
            .iter()
            .enumerate()
            .filter(|(_, &id)| id == 1)
            .nth(1)
            .unwrap()
            .0;
        ids[im_start + 1]
    };
    assert_eq!(after_second_im_start(&reference.chat.ids), user);
    assert_eq!(after_second_im_start(&ids), space_user);
    Ok(())
}
