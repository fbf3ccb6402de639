//! The published sampler and the patched one behind one interface, so that tests, benches and
//! `cargo repro` run both on the same logits in the same process.

use candle::{Result, Tensor};
use candle_transformers::generation::LogitsProcessor;
pub use candle_transformers::generation::Sampling;

/// Which `generation` module samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Implementation {
    /// The published crates' module: the `published` point of `crates/points`.
    Upstream,
    /// The module with `patches/` applied, in the candle-transformers that `[patch.crates-io]`
    /// builds: what the tests run.
    Patched,
    /// A point of `crates/vendor/points`, by name (one of `points::NAMES`): the published
    /// module, a patch's branch or the whole series, each built alike in `crates/points`, so
    /// that two points differ by their patches alone. What the benches compare.
    Point(PointName),
}

/// The name of a point of `points::NAMES`; `Implementation::point` makes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointName(&'static str);

pub use Implementation::{Patched, Point, Upstream};

/// Every `Sampling`, `ArgMax` first, with the parameters given: the one list that the fuzzer,
/// the property tests and the bug report's cases take their variants from. A new variant goes
/// here, in `temperature` and in `points::sampling_of!`; the compiler points at the last two.
pub fn all_samplings(temperature: f64, k: usize, p: f64) -> [Sampling; 6] {
    [
        Sampling::ArgMax,
        Sampling::All { temperature },
        Sampling::TopK { k, temperature },
        Sampling::TopP { p, temperature },
        Sampling::TopKThenTopP { k, p, temperature },
        Sampling::GumbelSoftmax { temperature },
    ]
}

/// The temperature of `sampling`; `None` for `ArgMax`.
pub fn temperature(sampling: &Sampling) -> Option<f64> {
    match *sampling {
        Sampling::ArgMax => None,
        Sampling::All { temperature }
        | Sampling::TopK { temperature, .. }
        | Sampling::TopP { temperature, .. }
        | Sampling::TopKThenTopP { temperature, .. }
        | Sampling::GumbelSoftmax { temperature } => Some(temperature),
    }
}

impl Implementation {
    /// The published module beside the patched crate: what the tests compare.
    pub const BOTH: [Implementation; 2] = [Upstream, Patched];

    pub fn name(self) -> &'static str {
        match self {
            Upstream => "upstream",
            Patched => "patched",
            Point(name) => name.0,
        }
    }

    /// The point called `name`, if there is one.
    pub fn point(name: &str) -> Option<Implementation> {
        points::NAMES
            .iter()
            .find(|n| **n == name)
            .map(|n| Point(PointName(n)))
    }

    /// The point that samples for this implementation; `None` for the patched crate.
    fn point_name(self) -> Option<&'static str> {
        match self {
            Upstream => Some(shared::PUBLISHED_POINT),
            Patched => None,
            Point(name) => Some(name.0),
        }
    }

    /// `LogitsProcessor::from_sampling(seed, sampling)`.
    pub fn from_sampling(self, seed: u64, sampling: &Sampling) -> Processor {
        Processor(match self.point_name() {
            None => Box::new(LogitsProcessor::from_sampling(seed, sampling.clone())),
            Some(name) => points::from_sampling(name, seed, sampling).expect(NAMED),
        })
    }

    /// `LogitsProcessor::new(seed, temperature, top_p)`.
    pub fn new_processor(
        self,
        seed: u64,
        temperature: Option<f64>,
        top_p: Option<f64>,
    ) -> Processor {
        Processor(match self.point_name() {
            None => Box::new(LogitsProcessor::new(seed, temperature, top_p)),
            Some(name) => points::new(name, seed, temperature, top_p).expect(NAMED),
        })
    }
}

/// A `PointName` and the published point are both in `points::NAMES`.
const NAMED: &str = "a point of `points::NAMES`";

/// A `LogitsProcessor` of any of the modules.
pub struct Processor(Box<dyn points::Sample>);

impl Processor {
    /// `draws` tokens, one `sample` call each.
    pub fn stream(&mut self, logits: &Tensor, draws: usize) -> Result<Vec<u32>> {
        (0..draws).map(|_| self.sample(logits)).collect()
    }

    /// `sample` itself, not `sample_f` with a closure that does nothing: the patched crate
    /// checks the weights only after a closure.
    pub fn sample(&mut self, logits: &Tensor) -> Result<u32> {
        self.0.sample(logits)
    }

    /// `sample_f`: `f` changes the probabilities before the draw.
    pub fn sample_f(&mut self, logits: &Tensor, f: impl FnOnce(&mut [f32])) -> Result<u32> {
        // `f` is called at most once; the trait object takes an `FnMut`.
        let mut f = Some(f);
        self.0.sample_with(logits, &mut |probabilities| {
            if let Some(f) = f.take() {
                f(probabilities)
            }
        })
    }
}

/// What one `sample` call gave: a token, an error's message, or a panic's.
///
/// An error is `Refused` or `Error` by where it comes from, never by its text, so that a test
/// can tell the sampler's own errors from rand's and candle's without copying the patches'
/// messages: changing a message then means changing it in its patch alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Token(u32),
    /// An error that the sampler raised itself, with `candle::bail!` or `Error::msg`: candle's
    /// `Error::Msg`, which is how the patches say why no token can be sampled.
    Refused(String),
    /// An error that the sampler passed on: rand's refusal, which reaches candle through
    /// `Error::wrap` (`Error::Wrapped`), or one of candle's own operations, such as a rank or an
    /// empty tensor error, each a variant of its own.
    Error(String),
    Panic(String),
}

impl Outcome {
    /// Runs `sample`, a panic included.
    pub fn of(sample: impl FnOnce() -> Result<u32>) -> Outcome {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(sample)) {
            Ok(result) => result.into(),
            Err(payload) => Outcome::Panic(
                payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
            ),
        }
    }
}

impl From<Result<u32>> for Outcome {
    fn from(result: Result<u32>) -> Outcome {
        match result {
            Ok(token) => Outcome::Token(token),
            Err(err) if raised_by_the_sampler(&err) => Outcome::Refused(message(&err)),
            Err(err) => Outcome::Error(message(&err)),
        }
    }
}

/// Whether the sampler raised `err` itself: an `Error::Msg`, which `candle::bail!` and
/// `Error::msg` make, perhaps inside the backtrace that `bail!` adds when `RUST_BACKTRACE` is set
/// or inside a context that a caller added. candle's operations fail with variants of their own
/// (rank, dtype, empty tensor) on what the sampler hands them; candle's `bail!`s are for what it
/// never asks of them, such as a softmax of non-contiguous logits, two tensors of different
/// dtypes or a kernel that a backend lacks.
fn raised_by_the_sampler(err: &candle::Error) -> bool {
    match err {
        candle::Error::Msg(_) => true,
        candle::Error::WithBacktrace { inner, .. }
        | candle::Error::Context { inner, .. }
        | candle::Error::WithPath { inner, .. } => raised_by_the_sampler(inner),
        _ => false,
    }
}

/// An error's message without the backtrace that candle adds when `RUST_BACKTRACE` is set.
pub fn message(err: &candle::Error) -> String {
    match err {
        candle::Error::WithBacktrace { inner, .. } => message(inner),
        // As candle writes it, the context on a line of its own, without the backtrace.
        candle::Error::Context { inner, context } => format!("{context}\n{}", message(inner)),
        err => err.to_string(),
    }
}

/// rand's message for weights it cannot sample from: what upstream says at temperature 0.
pub const RAND_INVALID_WEIGHT: &str = "A weight is negative, too large or not a valid number";
