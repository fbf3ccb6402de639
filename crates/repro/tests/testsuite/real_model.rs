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
    let text = model.vocab.chat(fixture::PROMPT)?;
    let ids = vocab::encode(&model.tokenizer, &text)?;
    assert_eq!(ids, committed.provenance.token_ids);
    let logits: Vec<f32> = model.forward(&ids, 0)?.to_vec1()?;
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

/// The decode loop of the benches generates the same tokens on the published point and the whole
/// series for every comparison but `GumbelSoftmax`, whose noise the series changes: their
/// forward passes do the same work, which is what lets the report count the sampler's time alone.
#[test]
#[cfg_attr(not(model_on_disk), ignore = "needs the model: bash ci/fetch-model.sh")]
fn the_decode_loop_gives_the_same_tokens_on_both_sides() -> Result<()> {
    use repro::decode::DecodeLoop;
    use testbed::sampler::{all_samplings, Implementation};
    let Some(mut decode) = DecodeLoop::load()? else {
        anyhow::bail!("{}", repro::decode::NEEDS_THE_MODEL);
    };
    let side = |name: &str| Implementation::point(name).expect("a point of points::NAMES");
    let (published, series) = (side(shared::PUBLISHED_POINT), side(shared::SERIES_POINT));
    let greedy = Sampling::TopK {
        k: 40,
        temperature: 0.0,
    };
    let mut compared = 0;
    for (before, after) in all_samplings(0.8, 40, 0.9)
        .into_iter()
        .map(|s| (s.clone(), s))
        .chain([(Sampling::ArgMax, greedy)])
    {
        if matches!(before, Sampling::GumbelSoftmax { .. }) {
            continue;
        }
        let mut tokens = |implementation: Implementation, sampling: &Sampling| {
            let mut processor = implementation.from_sampling(42, sampling);
            decode.generate(&mut processor, 4).map(|g| g.tokens)
        };
        let (a, b) = (tokens(published, &before)?, tokens(series, &after)?);
        assert_eq!(
            a, b,
            "{before:?} on the published point, {after:?} on the series"
        );
        assert_eq!(a.len(), 4);
        compared += 1;
    }
    assert_eq!(compared, 6);
    Ok(())
}
