//! The loops `cargo xtask bench-report` runs, on one side of a bench comparison (`group`):
//!
//! - `bench-driver count <upstream|patched> <group> <vocab> <calls>` samples `calls` times, for
//!   callgrind to count instructions; two runs with different `calls` give one call's count.
//! - `bench-driver pair <group> <vocab> <rounds> <calls> [cpu|cuda|metal]` times `calls` calls of
//!   each side back to back, in alternating order, and prints one line per round:
//!   `<upstream ns> <patched ns>`. On a noisy machine the ratio of two separate measurements
//!   drifts by more than the effects looked for; the ratio within a round does not.
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

const USAGE: &str = "usage: bench-driver count <upstream|patched> <group> <vocab> <calls>\n       \
                     bench-driver pair <group> <vocab> <rounds> <calls> [cpu|cuda|metal]\n       \
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
            let mut sides = [processor("upstream", group)?, processor("patched", group)?];
            let time = |processor: &mut Processor| -> Result<u128, String> {
                let elapsed = time_calls(processor, &logits, &device, calls);
                Ok(elapsed.map_err(|e| e.to_string())?.as_nanos())
            };
            // Warm up both, then alternate which side goes first.
            time(&mut sides[0])?;
            time(&mut sides[1])?;
            for round in 0..number::<u64>("rounds", rounds)? {
                let (upstream, patched) = if round % 2 == 0 {
                    let upstream = time(&mut sides[0])?;
                    (upstream, time(&mut sides[1])?)
                } else {
                    let patched = time(&mut sides[1])?;
                    (time(&mut sides[0])?, patched)
                };
                println!("{upstream} {patched}");
            }
            Ok(())
        }
        [mode] if mode == "settings" => {
            let settings = serde_json::json!({
                "model": testbed::model::FILE_NAME,
                "vocab": fixture.logits.len(),
                "seed": benches::SEED,
                "temperature": benches::TEMPERATURE,
            });
            println!("{settings}");
            Ok(())
        }
        _ => Err(USAGE.to_string()),
    }
}

/// The processor of the side called `name` (`upstream` or `patched`) in comparison `group`.
fn processor(name: &str, group: &str) -> Result<Processor, String> {
    let comparison = comparison(group).ok_or_else(|| format!("no comparison {group}"))?;
    comparison
        .processor(name)
        .ok_or_else(|| format!("side must be upstream or patched, got {name}"))
}
