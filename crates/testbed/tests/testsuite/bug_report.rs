//! Every line of the bug report (shared/reference), on the real SmolLM2 logits of the committed fixture, upstream and
//! patched in the same run. Upstream's failures are pinned too: if upstream ever changes, these
//! tests say that the patch may be moot.

use candle::{Device, Result, Tensor};
use testbed::cases::{self, Build};
use testbed::fixture::{Fixture, LogitStats};
use testbed::sampler::{
    message, Implementation, Outcome, Patched, Sampling, Upstream, RAND_INVALID_WEIGHT,
};

/// "R": the greedy choice after "What is Rust?".
const GREEDY: u32 = 66;
/// "ChannelType": the token with the lowest logit, which sampling at temperature -1 favours.
const LEAST_LIKELY: u32 = 43179;

fn rand_error() -> Outcome {
    Outcome::Error(RAND_INVALID_WEIGHT.to_string())
}

/// What upstream gives for each case of `cases::bug_report()`, in order; patched gives `GREEDY`
/// for every one.
fn upstream_expected() -> Vec<(&'static str, Outcome)> {
    vec![
        ("TopK { k: 40, temperature: 0.0 }", rand_error()),
        ("All { temperature: 0.0 }", rand_error()),
        ("TopP { p: 0.9, temperature: 0.0 }", rand_error()),
        (
            "TopKThenTopP { k: 40, p: 0.9, temperature: 0.0 }",
            rand_error(),
        ),
        ("GumbelSoftmax { temperature: 0.0 }", Outcome::Token(GREEDY)),
        ("All { temperature: 0.001 }", Outcome::Token(GREEDY)),
        ("All { temperature: 1e-7 }", Outcome::Token(GREEDY)),
        ("All { temperature: 1e-30 }", Outcome::Token(GREEDY)),
        ("All { temperature: 1e-38 }", rand_error()),
        ("All { temperature: f64::MIN_POSITIVE }", rand_error()),
        ("All { temperature: -0.0 }", rand_error()),
        ("All { temperature: -1.0 }", Outcome::Token(LEAST_LIKELY)),
        (
            "LogitsProcessor::new(seed, Some(0.0), None)",
            Outcome::Token(GREEDY),
        ),
        (
            "guarded at the call site (t 0.0, top-k Some(40)): ArgMax",
            Outcome::Token(GREEDY),
        ),
        (
            "guarded at the call site (t 0.0, top-k None): ArgMax",
            Outcome::Token(GREEDY),
        ),
        (
            "guarded at the call site (t 0.8, top-k Some(40)): TopK { k: 40, temperature: 0.8 }",
            Outcome::Token(GREEDY),
        ),
    ]
}

#[test]
fn the_fixture_is_what_its_provenance_says() -> Result<()> {
    let fixture = Fixture::load()?;
    let stats = LogitStats::of(&fixture.logits);
    assert_eq!(stats, fixture.provenance.stats);
    // The report's figures for the same model and prompt.
    assert_eq!(stats.count, 49152);
    assert_eq!(stats.argmax, GREEDY);
    assert_eq!(fixture.provenance.argmax_text, "R");
    assert!(stats.max > 29.0 && stats.max < 32.0, "max {}", stats.max);
    assert_eq!((stats.nan, stats.inf), (0, 0));
    let lowest = fixture.logits.iter().copied().fold(f32::INFINITY, f32::min);
    assert_eq!(fixture.logits[LEAST_LIKELY as usize], lowest);
    Ok(())
}

#[test]
fn every_case_of_the_report_upstream_beside_patched() -> Result<()> {
    let fixture = Fixture::load()?;
    let cases = cases::bug_report();
    let expected = upstream_expected();
    let labels: Vec<&str> = cases.iter().map(|c| c.label.as_str()).collect();
    let expected_labels: Vec<&str> = expected.iter().map(|(label, _)| *label).collect();
    assert_eq!(labels, expected_labels);
    for (name, device) in testbed::device::all_available() {
        let logits = fixture.tensor(&device)?;
        for (case, (_, upstream)) in cases.iter().zip(&expected) {
            let context = format!("{} on {name}", case.label);
            assert_eq!(
                &case.run(Upstream, 42, &logits),
                upstream,
                "upstream, {context}"
            );
            assert_eq!(
                case.run(Patched, 42, &logits),
                Outcome::Token(GREEDY),
                "patched, {context}"
            );
        }
    }
    Ok(())
}

/// The report's own check: at temperature 0 every variant picks `logits.argmax(0)`.
#[test]
fn temperature_zero_is_the_argmax_for_every_variant() -> Result<()> {
    let fixture = Fixture::load()?;
    for (name, device) in testbed::device::all_available() {
        let logits = fixture.tensor(&device)?;
        let argmax = logits.argmax(0)?.to_scalar::<u32>()?;
        for temperature in [0.0, -0.0, -1.0, 1e-38, f64::MIN_POSITIVE, f64::NEG_INFINITY] {
            for sampling in cases::variants(temperature) {
                let context = format!("{sampling:?} on {name}");
                let token = Patched.from_sampling(7, &sampling).sample(&logits)?;
                assert_eq!(token, argmax, "{context}");
            }
        }
    }
    Ok(())
}

#[test]
fn new_agrees_with_from_sampling_at_every_temperature() -> Result<()> {
    let fixture = Fixture::load()?;
    let logits = fixture.tensor(&Device::Cpu)?;
    for temperature in [0.0, -1.0, 1e-8, 1e-7, 0.5, 1.0, 2.0] {
        for top_p in [None, Some(0.9)] {
            let sampling = match top_p {
                _ if temperature < 1e-7 => Sampling::ArgMax,
                None => Sampling::All { temperature },
                Some(p) => Sampling::TopP { p, temperature },
            };
            let mut from_new = Patched.new_processor(42, Some(temperature), top_p);
            let mut from_sampling = Patched.from_sampling(42, &sampling);
            for draw in 0..50 {
                let (a, b) = (from_new.sample(&logits)?, from_sampling.sample(&logits)?);
                assert_eq!(
                    a, b,
                    "draw {draw} at temperature {temperature}, top-p {top_p:?}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn the_report_fix_cases_build_what_the_report_says() {
    let fixes: Vec<Build> = cases::bug_report()
        .into_iter()
        .filter(|c| c.label.starts_with("guarded at the call site"))
        .map(|c| c.build)
        .collect();
    assert_eq!(
        fixes,
        [
            Build::FromSampling(Sampling::ArgMax),
            Build::FromSampling(Sampling::ArgMax),
            Build::FromSampling(Sampling::TopK {
                k: 40,
                temperature: 0.8
            }),
        ]
    );
}

#[test]
fn tiny_logits_tensors_follow_the_rule_too() -> Result<()> {
    // Small logits, but large enough that 4.0 / 1e-38 overflows f32 (0.4 / 1e-38 would not).
    let logits = Tensor::new(&[1.0f32, 4.0, 2.0, 3.0], &Device::Cpu)?;
    for temperature in [0.0, -1.0, 1e-38] {
        let sampling = Sampling::TopK { k: 2, temperature };
        assert_eq!(Patched.from_sampling(1337, &sampling).sample(&logits)?, 1);
        let upstream = Outcome::from(Upstream.from_sampling(1337, &sampling).sample(&logits));
        assert_ne!(upstream, Outcome::Token(1), "temperature {temperature}");
    }
    Ok(())
}

/// 0001's pull request opens with this reproducer and its outcome on `main` and on the branch.
/// The notes hold the code; this test runs it on the published module and on the patched one.
#[test]
fn the_reproducer_in_0001s_notes_gives_what_they_say(
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    const CODE: &str = "let logits = Tensor::new(&[1f32, 4.0, 2.0, 3.0], &Device::Cpu)?;
let sampling = Sampling::TopK { k: 2, temperature: 0.0 };
let mut processor = LogitsProcessor::from_sampling(42, sampling);
println!(\"{:?}\", processor.sample(&logits).map_err(|e| e.to_string()));";
    let notes = std::fs::read_to_string(
        shared::root().join("patches/0001-generation-Sample-greedily-at-temperature-0.md"),
    )?;
    assert!(
        notes.contains(CODE),
        "the notes' reproducer changed: change this test too"
    );
    let logits = candle::Tensor::new(&[1f32, 4.0, 2.0, 3.0], &candle::Device::Cpu)?;
    let sampling = Sampling::TopK {
        k: 2,
        temperature: 0.0,
    };
    let printed = |implementation: Implementation| {
        let mut processor = implementation.from_sampling(42, &sampling);
        let result = processor.sample(&logits).map_err(|e| message(&e));
        format!("{result:?}")
    };
    let (main, branch) = (printed(Upstream), printed(Patched));
    assert_eq!(main, format!("Err({RAND_INVALID_WEIGHT:?})"));
    assert_eq!(branch, "Ok(1)");
    for outcome in [main, branch] {
        assert!(notes.contains(&format!("`{outcome}`")), "{outcome}");
    }
    Ok(())
}
