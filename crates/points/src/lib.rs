//! Every point of `crates/vendor/points` (`cargo xtask vendor` writes them; never edit them):
//! the published `generation` module (twice: `published` and its `control`), what each patch's
//! branch holds and the whole series, each a module of this one crate, so that the benches
//! compare them built alike. `build.rs` writes the modules; this file gives them one interface.

use candle::{Result, Tensor};
use candle_transformers::generation::Sampling;

/// A `LogitsProcessor` of any point, or of the patched crate.
pub trait Sample {
    /// `LogitsProcessor::sample`, which a patch may make cheaper than `sample_f` with a closure
    /// that does nothing.
    fn sample(&mut self, logits: &Tensor) -> Result<u32>;

    /// `LogitsProcessor::sample_f`, with `f` called once.
    fn sample_with(&mut self, logits: &Tensor, f: &mut dyn FnMut(&mut [f32])) -> Result<u32>;
}

/// `Sample` for the `LogitsProcessor` of the `generation` module at `$module`.
macro_rules! impl_sample {
    ($($module:ident)::+) => {
        impl Sample for $($module)::+::LogitsProcessor {
            fn sample(&mut self, logits: &Tensor) -> Result<u32> {
                $($module)::+::LogitsProcessor::sample(self, logits)
            }

            fn sample_with(&mut self, logits: &Tensor, f: &mut dyn FnMut(&mut [f32])) -> Result<u32> {
                self.sample_f(logits, f)
            }
        }
    };
}

// The patched crate's, which `[patch.crates-io]` builds: what the tests run.
impl_sample!(candle_transformers::generation);

/// `sampling` (candle-transformers' `Sampling`) as the `Sampling` of the `generation` module at
/// `$module`, a module with the same variants: a point's.
#[macro_export]
macro_rules! sampling_of {
    ($($module:ident)::+, $sampling:expr) => {{
        use $($module)::+::Sampling as S;
        use ::candle_transformers::generation::Sampling;
        match *$sampling {
            Sampling::ArgMax => S::ArgMax,
            Sampling::All { temperature } => S::All { temperature },
            Sampling::TopK { k, temperature } => S::TopK { k, temperature },
            Sampling::TopP { p, temperature } => S::TopP { p, temperature },
            Sampling::TopKThenTopP { k, p, temperature } => S::TopKThenTopP { k, p, temperature },
            Sampling::GumbelSoftmax { temperature } => S::GumbelSoftmax { temperature },
        }
    }};
}

/// The points' names and `from_sampling`, from the list that `build.rs` writes.
macro_rules! points {
    ($($name:literal => $module:ident),* $(,)?) => {
        /// Every point, by its folder's name, in name order: the patches' numbers, then
        /// `control`, `published` and `series`.
        pub const NAMES: &[&str] = &[$($name),*];

        /// `LogitsProcessor::from_sampling(seed, sampling)` of the point `name`; `None` if
        /// there is no such point.
        pub fn from_sampling(name: &str, seed: u64, sampling: &Sampling) -> Option<Box<dyn Sample>> {
            match name {
                $($name => Some(Box::new($module::generation::LogitsProcessor::from_sampling(
                    seed,
                    sampling_of!($module::generation, sampling),
                ))),)*
                _ => None,
            }
        }

        /// `LogitsProcessor::new(seed, temperature, top_p)` of the point `name`; `None` if there
        /// is no such point.
        pub fn new(
            name: &str,
            seed: u64,
            temperature: Option<f64>,
            top_p: Option<f64>,
        ) -> Option<Box<dyn Sample>> {
            match name {
                $($name => Some(Box::new($module::generation::LogitsProcessor::new(
                    seed,
                    temperature,
                    top_p,
                ))),)*
                _ => None,
            }
        }

        $(impl_sample!($module::generation);)*
    };
}

include!(concat!(env!("OUT_DIR"), "/points.rs"));
