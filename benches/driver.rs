//! The loops `cargo xtask bench-report` runs, on points of `crates/vendor/points` (`published`,
//! a patch's number, `series`) in one bench comparison (`group`):
//!
//! - `bench-driver count <point> <group> <vocab> <calls>` samples `calls` times, for callgrind
//!   to count instructions; two runs with different `calls` give one call's count.
//! - `bench-driver pair <group> <vocab> <rounds> <calls> <cpu|cuda|metal> <point>...` times
//!   `calls` calls of each point back to back, rotating which goes first, and prints one line
//!   per round: each point's nanoseconds, in the order given. On a noisy machine the ratio of
//!   two separate measurements drifts by more than the effects looked for; the ratio within a
//!   round does not.
//! - `bench-driver decode <group> <rounds> <tokens> <point>...` generates `tokens` tokens with
//!   SmolLM2 once per point and round, rotating which goes first, and prints one line per round:
//!   each point's decode time and the part of it in `sample`, in nanoseconds
//!   (`benches::decode`).
//! - `bench-driver settings` prints what the benches run with, as JSON, for the report.

use std::process::ExitCode;

use benches::{comparison, logits, tensor, time_calls};
use candle::Device;
use testbed::fixture::Fixture;
use testbed::sampler::Processor;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: bench-driver count <point> <group> <vocab> <calls>
       bench-driver pair <group> <vocab> <rounds> <calls> <cpu|cuda|metal> <point>...
       bench-driver decode <group> <rounds> <tokens> <point>...
       bench-driver settings";

fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    shared::number(name, value).map_err(|e| e.to_string())
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fixture = Fixture::load().map_err(|e| e.to_string())?;
    match &args[..] {
        [mode, point, group, vocab, calls] if mode == "count" => {
            let vocab = number("vocab", vocab)?;
            let logits =
                tensor(&logits(&fixture, vocab), &Device::Cpu).map_err(|e| e.to_string())?;
            let mut processor = processor(point, group)?;
            for _ in 0..number::<u64>("calls", calls)? {
                std::hint::black_box(processor.sample(&logits).map_err(|e| e.to_string())?);
            }
            Ok(())
        }
        [mode, group, vocab, rounds, calls, device, points @ ..] if mode == "pair" => {
            let device = testbed::device::by_name(device).map_err(|e| e.to_string())?;
            let vocab = number("vocab", vocab)?;
            let logits = tensor(&logits(&fixture, vocab), &device).map_err(|e| e.to_string())?;
            let calls: u64 = number("calls", calls)?;
            let mut sides = processors(points, group)?;
            paired_rounds(number("rounds", rounds)?, sides.len(), |side| {
                let elapsed = time_calls(&mut sides[side], &logits, &device, calls);
                Ok(elapsed.map_err(|e| e.to_string())?.as_nanos().to_string())
            })
        }
        [mode, group, rounds, tokens, points @ ..] if mode == "decode" => {
            let Some(mut decode) = repro::decode::DecodeLoop::load().map_err(|e| e.to_string())?
            else {
                return Err(repro::decode::NEEDS_THE_MODEL.to_string());
            };
            let tokens: usize = number("tokens", tokens)?;
            let mut sides = processors(points, group)?;
            paired_rounds(number("rounds", rounds)?, sides.len(), |side| {
                let generation = decode
                    .generate(&mut sides[side], tokens)
                    .map_err(|e| format!("{e:#}"))?;
                let (total, sampler) = (generation.total, generation.sampler);
                Ok(format!("{} {}", total.as_nanos(), sampler.as_nanos()))
            })
        }
        [mode] if mode == "settings" => {
            let settings = shared::bench::Settings {
                model: testbed::model::FILE_NAME.to_string(),
                vocab: fixture.logits.len() as u64,
                seed: benches::SEED,
                temperature: benches::TEMPERATURE,
                points: points::NAMES.iter().map(|n| n.to_string()).collect(),
                decode_tokens: repro::decode::TOKENS as u64,
                model_on_disk: testbed::model::find().is_some(),
            };
            let settings = serde_json::to_string(&settings).map_err(|e| e.to_string())?;
            println!("{settings}");
            Ok(())
        }
        _ => Err(USAGE.to_string()),
    }
}

/// The processor of the point called `name` in comparison `group`.
fn processor(name: &str, group: &str) -> Result<Processor, String> {
    let comparison = comparison(group).ok_or_else(|| format!("no comparison {group}"))?;
    comparison.processor(name).ok_or_else(|| {
        format!(
            "point must be one of {}, got {name}",
            points::NAMES.join(", ")
        )
    })
}

/// The processors of `names` in comparison `group`: at least one.
fn processors(names: &[String], group: &str) -> Result<Vec<Processor>, String> {
    if names.is_empty() {
        return Err(format!("name the points to time\n{USAGE}"));
    }
    names.iter().map(|name| processor(name, group)).collect()
}

/// Runs `measure` once on each of `sides` sides to warm up, then `rounds` rounds of every side
/// back to back, rotating which goes first, and prints each round's results on one line, in
/// side order. A side that fails its warm-up (a point without a patch that the comparison needs,
/// such as `temperature_0` on a branch without greedy sampling at temperature 0) is left out of
/// the rounds: its column reads `-`, and its error goes to stderr.
fn paired_rounds(
    rounds: usize,
    sides: usize,
    mut measure: impl FnMut(usize) -> Result<String, String>,
) -> Result<(), String> {
    let mut left_out = vec![false; sides];
    for (side, out) in left_out.iter_mut().enumerate() {
        if let Err(err) = measure(side) {
            eprintln!("side {side} left out: {err}");
            *out = true;
        }
    }
    if left_out.iter().all(|out| *out) {
        return Err("no side can run this comparison".to_string());
    }
    for round in 0..rounds {
        let mut results = vec!["-".to_string(); sides];
        for offset in 0..sides {
            let side = (round + offset) % sides;
            if !left_out[side] {
                results[side] = measure(side)?;
            }
        }
        println!("{}", results.join(" "));
    }
    Ok(())
}
