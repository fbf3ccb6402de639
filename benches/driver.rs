//! The loops `cargo xtask bench-report` runs, on one side of a bench comparison (`group`):
//!
//! - `bench-driver count <upstream|fixes|patched> <group> <vocab> <calls>` samples `calls` times,
//!   for callgrind to count instructions; two runs with different `calls` give one call's count.
//! - `bench-driver pair <group> <vocab> <rounds> <calls> [cpu|cuda|metal]` times `calls` calls of
//!   each side back to back, rotating which goes first, and prints one line per round:
//!   `<upstream ns> <fixes ns> <patched ns>`, the sides of `benches::SIDES`. On a noisy machine
//!   the ratio of two separate measurements drifts by more than the effects looked for; the
//!   ratio within a round does not.
//! - `bench-driver decode <group> <rounds> <tokens>` generates `tokens` tokens with SmolLM2 once
//!   per side and round, rotating which side goes first, and prints one line per round: each
//!   side's decode time and the part of it in `sample`, in nanoseconds (`benches::decode`).
//! - `bench-driver settings` prints what the benches run with, as JSON, for the report.

use std::process::ExitCode;

use benches::{comparison, logits, tensor, time_calls, SIDES};
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

const USAGE: &str =
    "usage: bench-driver count <upstream|fixes|patched> <group> <vocab> <calls>\n       \
                     bench-driver pair <group> <vocab> <rounds> <calls> [cpu|cuda|metal]\n       \
                     bench-driver decode <group> <rounds> <tokens>\n       \
                     bench-driver settings";

fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
    shared::number(name, value).map_err(|e| e.to_string())
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fixture = Fixture::load().map_err(|e| e.to_string())?;
    match &args[..] {
        [mode, side, group, vocab, calls] if mode == "count" => {
            let vocab = number("vocab", vocab)?;
            let logits =
                tensor(&logits(&fixture, vocab), &Device::Cpu).map_err(|e| e.to_string())?;
            let mut processor = processor(side, group)?;
            for _ in 0..number::<u64>("calls", calls)? {
                std::hint::black_box(processor.sample(&logits).map_err(|e| e.to_string())?);
            }
            Ok(())
        }
        [mode, group, vocab, rounds, calls, rest @ ..] if mode == "pair" && rest.len() <= 1 => {
            let device = testbed::device::by_name(rest.first().map_or("cpu", String::as_str))
                .map_err(|e| e.to_string())?;
            let vocab = number("vocab", vocab)?;
            let logits = tensor(&logits(&fixture, vocab), &device).map_err(|e| e.to_string())?;
            let calls: u64 = number("calls", calls)?;
            let mut sides = all_sides(group)?;
            paired_rounds(number("rounds", rounds)?, |side| {
                let elapsed = time_calls(&mut sides[side], &logits, &device, calls);
                Ok(elapsed.map_err(|e| e.to_string())?.as_nanos().to_string())
            })
        }
        [mode, group, rounds, tokens] if mode == "decode" => {
            let Some(mut decode) =
                benches::decode::DecodeLoop::load().map_err(|e| e.to_string())?
            else {
                return Err(benches::decode::NEEDS_THE_MODEL.to_string());
            };
            let tokens: usize = number("tokens", tokens)?;
            let mut sides = all_sides(group)?;
            paired_rounds(number("rounds", rounds)?, |side| {
                let generation = decode
                    .generate(&mut sides[side], tokens)
                    .map_err(|e| format!("{e:#}"))?;
                let (total, sampler) = (generation.total, generation.sampler);
                Ok(format!("{} {}", total.as_nanos(), sampler.as_nanos()))
            })
        }
        [mode] if mode == "settings" => {
            let settings = serde_json::json!({
                "model": testbed::model::FILE_NAME,
                "vocab": fixture.logits.len(),
                "seed": benches::SEED,
                "temperature": benches::TEMPERATURE,
                "sides": SIDES.iter().map(|(side, _)| *side).collect::<Vec<_>>(),
                "decode_tokens": benches::decode::TOKENS,
                "model_on_disk": testbed::model::find().is_some(),
            });
            println!("{settings}");
            Ok(())
        }
        _ => Err(USAGE.to_string()),
    }
}

/// The processor of the side called `name` (one of `benches::SIDES`) in comparison `group`.
fn processor(name: &str, group: &str) -> Result<Processor, String> {
    let comparison = comparison(group).ok_or_else(|| format!("no comparison {group}"))?;
    comparison
        .processor(name)
        .ok_or_else(|| format!("side must be upstream, fixes or patched, got {name}"))
}

/// The processor of every side of `benches::SIDES` in comparison `group`.
fn all_sides(group: &str) -> Result<Vec<Processor>, String> {
    SIDES
        .iter()
        .map(|(side, _)| processor(side, group))
        .collect()
}

/// Runs `measure` once on each side to warm up, then `rounds` rounds of every side back to back,
/// rotating which goes first, and prints each round's results on one line, in side order.
fn paired_rounds(
    rounds: usize,
    mut measure: impl FnMut(usize) -> Result<String, String>,
) -> Result<(), String> {
    for side in 0..SIDES.len() {
        measure(side)?;
    }
    for round in 0..rounds {
        let mut results = vec![String::new(); SIDES.len()];
        for offset in 0..SIDES.len() {
            let side = (round + offset) % SIDES.len();
            results[side] = measure(side)?;
        }
        println!("{}", results.join(" "));
    }
    Ok(())
}
