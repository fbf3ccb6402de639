//! The real model, when it is on disk (`bash ci/fetch-model.sh`): without it these tests are
//! ignored (see `build.rs`), and CI, which sets REPRO_REQUIRE_MODEL, fails instead.

use anyhow::Result;
use candle::Device;
use repro::model::Model;
use repro::vocab::{self, Vocab};
use testbed::fixture::{self, Fixture};
use testbed::sampler::{Patched, Sampling, Upstream, RAND_INVALID_WEIGHT};

fn load() -> Result<Model> {
    Model::load(&testbed::model::required()?, &Device::Cpu)
}

#[test]
#[cfg_attr(not(model_on_disk), ignore = "needs the model: bash ci/fetch-model.sh")]
fn the_model_is_the_pinned_file() -> Result<()> {
    let path = testbed::model::required()?;
    assert_eq!(
        fixture::sha256_hex(&std::fs::read(path)?),
        testbed::model::SHA256
    );
    Ok(())
}

#[test]
#[cfg_attr(not(model_on_disk), ignore = "needs the model: bash ci/fetch-model.sh")]
fn the_vocabulary_fixture_is_the_ggufs() -> Result<()> {
    let model = load()?;
    assert!(
        model.vocab == Vocab::load(&vocab::fixture_path())?,
        "run `cargo repro --save-fixture`"
    );
    Ok(())
}

/// CI re-derives the logits from the model: they must match the committed ones.
#[test]
#[cfg_attr(not(model_on_disk), ignore = "needs the model: bash ci/fetch-model.sh")]
fn the_logits_fixture_matches_the_model() -> Result<()> {
    let mut model = load()?;
    let committed = Fixture::load()?;
    let text = repro::chat::render(&model.vocab.chat_template, fixture::PROMPT)?;
    let ids = model.encode(&text)?;
    assert_eq!(ids, committed.provenance.token_ids);
    let logits: Vec<f32> = model.prefill(&ids)?.to_vec1()?;
    assert_eq!(logits.len(), committed.logits.len());
    // Quantized kernels differ by processor (AVX2, AVX-512, NEON) in the last bits.
    let largest = committed.largest_difference(&logits);
    assert!(
        largest < 1e-3,
        "logits differ from the fixture by up to {largest}"
    );
    assert_eq!(
        testbed::fixture::LogitStats::of(&logits).argmax,
        committed.provenance.stats.argmax
    );
    Ok(())
}

/// Greedy generation end to end: `from_sampling` at temperature 0 gives exactly the tokens of
/// `new(seed, None, None)`; upstream fails on the first token.
#[test]
#[cfg_attr(not(model_on_disk), ignore = "needs the model: bash ci/fetch-model.sh")]
fn greedy_generation_through_from_sampling() -> Result<()> {
    let mut model = load()?;
    let prompt = Fixture::load()?.provenance.token_ids;
    let greedy = Sampling::TopK {
        k: 40,
        temperature: 0.0,
    };
    let mut processor = Patched.from_sampling(42, &greedy);
    let patched = model.generate(&prompt, 16, |logits| processor.sample(logits))?;
    let mut reference = Patched.new_processor(42, None, None);
    let expected = model.generate(&prompt, 16, |logits| reference.sample(logits))?;
    assert_eq!(patched, expected);
    assert_eq!(patched.len(), 16);
    let text = model
        .tokenizer
        .decode(&patched, false)
        .map_err(anyhow::Error::msg)?;
    assert!(text.starts_with("Rust is a"), "{text:?}");

    let mut upstream = Upstream.from_sampling(42, &greedy);
    let mut calls = 0;
    let err = model
        .generate(&prompt, 16, |logits| {
            calls += 1;
            upstream.sample(logits)
        })
        .unwrap_err();
    assert_eq!(calls, 1);
    let err = err.downcast_ref::<candle::Error>().expect("a candle error");
    assert_eq!(testbed::sampler::message(err), RAND_INVALID_WEIGHT);
    Ok(())
}
