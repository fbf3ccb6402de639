//! `pair` times the points back to back because on a noisy machine the ratio of two separate
//! measurements drifts by more than the effects looked for; the ratio within a round does not.

use std::process::ExitCode;

use anyhow::{ensure, Context, Result};
use benches::{comparisons, logits, time_calls};
use candle::Device;
use clap::Parser;
use repro::decode::{DecodeLoop, Generation, NEEDS_THE_MODEL};
use testbed::fixture::Fixture;
use testbed::sampler::Processor;

/// The loops `cargo xtask bench-report` runs on the points of crates/vendor/points.
#[derive(Debug, Parser)]
#[command(name = "bench-driver")]
enum Driver {
    /// Sample CALLS times, for callgrind to count instructions.
    Count {
        point: String,
        group: String,
        vocab: usize,
        calls: u64,
    },
    /// Time CALLS calls of each point back to back, ROUNDS times, rotating which goes first;
    /// print one line per round, each point's nanoseconds in the order given.
    Pair {
        group: String,
        vocab: usize,
        rounds: usize,
        calls: u64,
        /// cpu, cuda or metal.
        device: String,
        #[arg(required = true)]
        points: Vec<String>,
    },
    /// Generate TOKENS tokens with SmolLM2 once per point and round; print one line per round,
    /// each point's decode time and the part of it in `sample`, in nanoseconds.
    Decode {
        group: String,
        rounds: usize,
        tokens: usize,
        #[arg(required = true)]
        points: Vec<String>,
    },
    /// Print what the benches run with, as JSON, for the report.
    Settings,
}

fn main() -> ExitCode {
    shared::exit(run(Driver::parse()))
}

fn run(driver: Driver) -> Result<()> {
    let fixture = Fixture::load()?;
    match driver {
        Driver::Count {
            point,
            group,
            vocab,
            calls,
        } => {
            // Under callgrind, where two runs with different `calls` give one call's count.
            let logits = logits(&fixture, vocab, &Device::Cpu)?;
            let mut processor = point_processor(&point, &group)?;
            time_calls(&mut processor, &logits, &Device::Cpu, calls)?;
        }
        Driver::Pair {
            group,
            vocab,
            rounds,
            calls,
            device,
            points,
        } => {
            let device = testbed::device::by_name(&device)?;
            let logits = logits(&fixture, vocab, &device)?;
            paired_rounds(rounds, &points, &group, |processor| {
                let elapsed = time_calls(processor, &logits, &device, calls)?;
                Ok(elapsed.as_nanos().to_string())
            })?
        }
        Driver::Decode {
            group,
            rounds,
            tokens,
            points,
        } => {
            let mut decode = DecodeLoop::load()?.context(NEEDS_THE_MODEL)?;
            paired_rounds(rounds, &points, &group, |processor| {
                let Generation { total, sampler, .. } = decode.generate(processor, tokens)?;
                Ok(format!("{} {}", total.as_nanos(), sampler.as_nanos()))
            })?
        }
        Driver::Settings => {
            let settings = shared::bench::Settings {
                model: testbed::model::FILE_NAME.to_string(),
                vocab: fixture.logits.len() as u64,
                seed: benches::SEED,
                temperature: benches::TEMPERATURE,
                points: points::NAMES.iter().map(|n| n.to_string()).collect(),
                decode_tokens: repro::decode::TOKENS as u64,
                model_on_disk: testbed::model::find().is_some(),
            };
            println!("{}", serde_json::to_string(&settings)?);
        }
    }
    Ok(())
}

fn point_processor(name: &str, group: &str) -> Result<Processor> {
    let comparison = comparisons().into_iter().find(|c| c.group == group);
    let comparison = comparison.with_context(|| format!("no comparison {group}"))?;
    let names = points::NAMES.join(", ");
    comparison
        .processor(name)
        .with_context(|| format!("point must be one of {names}, got {name}"))
}

/// Runs `measure` once on each point to warm up, then `rounds` rounds of every point back to
/// back, rotating which goes first, printing a line per round. A point that fails its warm-up
/// (such as `temperature_0` on a branch without 0001) reads `-`, its error on stderr.
fn paired_rounds(
    rounds: usize,
    points: &[String],
    group: &str,
    mut measure: impl FnMut(&mut Processor) -> Result<String>,
) -> Result<()> {
    let sides: Result<Vec<Processor>> = points.iter().map(|p| point_processor(p, group)).collect();
    let mut sides = sides?;
    let mut runs = Vec::new();
    for (side, processor) in sides.iter_mut().enumerate() {
        let warmed =
            measure(processor).inspect_err(|err| eprintln!("side {side} left out: {err:#}"));
        runs.push(warmed.is_ok());
    }
    ensure!(runs.contains(&true), "no side can run this comparison");
    for round in 0..rounds {
        let mut results = vec!["-".to_string(); sides.len()];
        for offset in 0..sides.len() {
            let side = (round + offset) % sides.len();
            if runs[side] {
                results[side] = measure(&mut sides[side])?;
            }
        }
        println!("{}", results.join(" "));
    }
    Ok(())
}
